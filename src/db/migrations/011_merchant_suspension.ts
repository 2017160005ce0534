import { type Kysely, PostgresAdapter, sql } from 'kysely';

/** When the operator suspended a merchant (merchants/suspension.ts); null while it may work. */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`alter table merchants add column if not exists suspended_at bigint`.execute(db);
    return;
  }
  // SQLite runs migrations outside a transaction: if a start was cut short after the column
  // was added but before this migration was recorded, the column is already there.
  const merchants = (await db.introspection.getTables()).find((t) => t.name === 'merchants');
  if (!merchants?.columns.some((c) => c.name === 'suspended_at')) {
    await db.schema.alterTable('merchants').addColumn('suspended_at', 'bigint').execute();
  }
}
