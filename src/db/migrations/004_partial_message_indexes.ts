import { type Kysely, sql } from 'kysely';

/**
 * Messages the service sends itself (OTPs, payment prompts) have no merchant, and no
 * message has a provider id until a real transport has taken it. Indexing those NULLs
 * bought nothing and cost two index writes per message on the payment path; the indexes
 * now cover only rows that have the value. Lookups by `merchant_id = ?` and
 * `provider_id = ?` imply IS NOT NULL, so both databases still use them.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('messages_merchant').execute();
  await db.schema
    .createIndex('messages_merchant')
    .on('messages')
    .columns(['merchant_id', 'created_at'])
    .where(sql.ref('merchant_id'), 'is not', null)
    .execute();
  await db.schema.dropIndex('messages_provider').execute();
  await db.schema
    .createIndex('messages_provider')
    .on('messages')
    .column('provider_id')
    .where(sql.ref('provider_id'), 'is not', null)
    .execute();
}
