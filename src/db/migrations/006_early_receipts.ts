import type { Kysely } from 'kysely';

/**
 * Delivery receipts that arrived before the record of their submission (the SMSC answered
 * the receipt over another instance's bind, or before its submit_sm_resp). They are kept
 * here, durably, before the SMSC is told the receipt was received, and applied once the
 * submission's record (its provider id) is there.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('early_receipts')
    .ifNotExists()
    .addColumn('provider_id', 'text', (c) => c.primaryKey())
    .addColumn('delivered', 'integer', (c) => c.notNull())
    .addColumn('detail', 'text', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .execute();
}
