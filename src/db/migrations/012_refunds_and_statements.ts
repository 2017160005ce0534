import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * Money back and money accounted (CONTRACT §11–§13):
 * - `refunds`, and each payment's `refunded_amount`;
 * - `settlements`, the operator's payments of a merchant's balance to its bank;
 * - `ledger_entries`, an account's statement: one row per posting to a wallet or merchant
 *   account, numbered per account (`seq`, under the account row's lock, so the numbers follow
 *   the order the balance moved in) with the balance it left. Keyset pages and the CSV walk
 *   `(account_id, seq)`; `ledger_accounts.entries` is the last number given. Existing postings
 *   are numbered in the order they were made, their balances summed in that order.
 *   `ledger_accounts.last_entry_at` is the time of the last entry: an entry is never dated
 *   before the one before it (instances' clocks differ, and a unit takes its time before it
 *   waits for the account's lock), so a range of times is a run of numbers.
 *
 * Every instance must be stopped for this migration: one of an older version still running
 * would move balances without writing their entries.
 *
 * SQLite runs migrations outside a transaction, so each step may run again after a start cut
 * short: tables and indexes IF NOT EXISTS, columns added only when missing, the copy of old
 * postings ON CONFLICT DO NOTHING.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const columns = async (table: string) =>
    new Set((await db.introspection.getTables()).find((t) => t.name === table)?.columns.map((c) => c.name) ?? []);

  if (!(await columns('payments')).has('refunded_amount'))
    await db.schema
      .alterTable('payments')
      .addColumn('refunded_amount', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  if (!(await columns('ledger_accounts')).has('entries'))
    await db.schema
      .alterTable('ledger_accounts')
      .addColumn('entries', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  if (!(await columns('ledger_accounts')).has('last_entry_at'))
    await db.schema
      .alterTable('ledger_accounts')
      .addColumn('last_entry_at', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();

  await db.schema
    .createTable('refunds')
    .ifNotExists()
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('merchant_id', 'text', (c) => c.notNull().references('merchants.id'))
    .addColumn('payment_id', 'text', (c) => c.notNull().references('payments.id'))
    .addColumn('api_key_id', 'text')
    .addColumn('refund_reference', 'text', (c) => c.notNull())
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('refunds_merchant_reference', ['merchant_id', 'refund_reference'])
    .execute();
  await db.schema.createIndex('refunds_payment').ifNotExists().on('refunds').columns(['payment_id', 'created_at']).execute();

  await db.schema
    .createTable('settlements')
    .ifNotExists()
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('merchant_id', 'text', (c) => c.notNull().references('merchants.id'))
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('reference', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('settlements_merchant_reference', ['merchant_id', 'reference'])
    .execute();

  await db.schema
    .createTable('ledger_entries')
    .ifNotExists()
    .addColumn('account_id', 'text', (c) => c.notNull().references('ledger_accounts.id'))
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('transaction_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('balance_after', 'bigint', (c) => c.notNull())
    .addColumn('reference', 'text')
    .addColumn('order_id', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('ledger_entries_pk', ['account_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('ledger_entries_time')
    .ifNotExists()
    .on('ledger_entries')
    .columns(['account_id', 'created_at', 'seq'])
    .execute();

  // The postings made so far, numbered per account in the order they were made.
  const sum = postgres ? sql`cast(sum(p.amount) over w as bigint)` : sql`sum(p.amount) over w`;
  await sql`
    insert into ledger_entries (account_id, seq, transaction_id, kind, amount, balance_after, reference, order_id, created_at)
    select p.account_id, row_number() over w, p.transaction_id, t.kind, p.amount, ${sum}, t.reference, pay.order_id, p.created_at
    from ledger_postings p
    join ledger_transactions t on t.id = p.transaction_id
    join ledger_accounts a on a.id = p.account_id
    left join payments pay on pay.id = t.reference and t.kind = 'payment'
    where a.kind <> 'cash_in'
    window w as (partition by p.account_id order by p.created_at, p.id rows unbounded preceding)
    on conflict do nothing`.execute(db);
  await sql`
    update ledger_accounts set
      entries = (select count(*) from ledger_entries e where e.account_id = ledger_accounts.id),
      last_entry_at = coalesce((select max(e.created_at) from ledger_entries e where e.account_id = ledger_accounts.id), 0)
    where kind <> 'cash_in'`.execute(db);

  // A statement is as append-only as the postings it repeats (migration 007).
  if (postgres) {
    await sql`drop trigger if exists ledger_entries_append_only on ledger_entries`.execute(db);
    await sql`
      create trigger ledger_entries_append_only before update or delete on ledger_entries
      for each statement execute function lipa_ledger_append_only()`.execute(db);
    await sql`drop trigger if exists ledger_entries_no_truncate on ledger_entries`.execute(db);
    await sql`
      create trigger ledger_entries_no_truncate before truncate on ledger_entries
      for each statement execute function lipa_ledger_append_only()`.execute(db);
    return;
  }
  for (const operation of ['update', 'delete']) {
    await sql`
      create trigger if not exists ${sql.raw(`ledger_entries_no_${operation}`)} before ${sql.raw(operation)} on ledger_entries
      begin select raise(abort, ${sql.lit(`ledger: ledger_entries is append-only (${operation.toUpperCase()} refused)`)}); end`.execute(db);
  }
}
