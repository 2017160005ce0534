import type { Kysely } from 'kysely';

/**
 * Indexes for reads that otherwise walk every row of a large table. On SQLite a read blocks
 * the event loop, so each of these froze every request for the time it took: measured with
 * 2 million payments, 300,000 payers and a day of logins (docs/performance.md):
 *
 * - a merchant's payments of one status (`GET /api/v1/payments?status=pending`): 0.9-1.7 s,
 *   walking all of the merchant's payments for a rare status;
 * - the operator's list of payers: 0.4 s, a sort of all of them;
 * - housekeeping's purge of old OTP challenges and throttle windows: a scan of each table.
 *
 * Building an index locks the table's writes meanwhile. On a large PostgreSQL database, build
 * them beforehand without that lock (`CREATE INDEX CONCURRENTLY`, the same names and columns):
 * this migration then leaves them as they are (docs/architecture.md, migrations).
 */
// (A payer's payments, which a scan found in 0.4-1.3 s, are read by phone in payments_payer:
// wallet.ts. An index on payer_id as well cost creations 10-13 % in alternating runs.)
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('payments_merchant_status')
    .ifNotExists()
    .on('payments')
    .columns(['merchant_id', 'status', 'created_at', 'id'])
    .execute();
  await db.schema.createIndex('payers_created').ifNotExists().on('payers').columns(['created_at', 'id']).execute();
  await db.schema.createIndex('otp_challenges_expiry').ifNotExists().on('otp_challenges').column('expires_at').execute();
  await db.schema.createIndex('auth_throttle_window').ifNotExists().on('auth_throttle').column('window_start').execute();
}
