import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  // Messages become a queue: each is stored before it is sent, and the worker records
  // every attempt's outcome on the row.
  await db.schema.alterTable('messages').addColumn('messaging_key_id', 'text').execute();
  await db.schema.alterTable('messages').addColumn('provider_id', 'text').execute();
  await db.schema.alterTable('messages').addColumn('segments', 'integer').execute();
  await db.schema
    .alterTable('messages')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('messages')
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('messages')
    .addColumn('locked_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('messages').addColumn('last_error', 'text').execute();
  await db.schema.createIndex('messages_due').on('messages').columns(['status', 'next_attempt_at']).execute();
  await db.schema.createIndex('messages_provider').on('messages').column('provider_id').execute();
}
