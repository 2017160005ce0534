import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * The ledger is append-only in the database itself, not only in the code that writes it: an
 * UPDATE or DELETE of a posting or a ledger transaction is refused, whoever sends it (a bug,
 * a migration, an operator at a SQL prompt). Corrections are new, balancing transactions.
 * Account balances stay updatable: they are kept in the same transaction as the postings,
 * and checkLedger() proves they agree.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  const tables = ['ledger_postings', 'ledger_transactions'];
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`
      create or replace function lipa_ledger_append_only() returns trigger language plpgsql as $$
      begin
        raise exception 'ledger: % is append-only (% refused)', tg_table_name, tg_op using errcode = 'restrict_violation';
      end
      $$`.execute(db);
    for (const table of tables) {
      await sql`drop trigger if exists ${sql.raw(`${table}_append_only`)} on ${sql.table(table)}`.execute(db);
      await sql`
        create trigger ${sql.raw(`${table}_append_only`)} before update or delete on ${sql.table(table)}
        for each statement execute function lipa_ledger_append_only()`.execute(db);
      // TRUNCATE skips row and statement triggers for DELETE; it has its own.
      await sql`drop trigger if exists ${sql.raw(`${table}_no_truncate`)} on ${sql.table(table)}`.execute(db);
      await sql`
        create trigger ${sql.raw(`${table}_no_truncate`)} before truncate on ${sql.table(table)}
        for each statement execute function lipa_ledger_append_only()`.execute(db);
    }
    return;
  }
  // SQLite runs migrations outside a transaction: IF NOT EXISTS lets a start that was cut
  // short run this again.
  for (const table of tables) {
    for (const operation of ['update', 'delete']) {
      await sql`
        create trigger if not exists ${sql.raw(`${table}_no_${operation}`)} before ${sql.raw(operation)} on ${sql.table(table)}
        begin select raise(abort, ${sql.lit(`ledger: ${table} is append-only (${operation.toUpperCase()} refused)`)}); end`.execute(db);
    }
  }
}
