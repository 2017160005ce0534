import { type Kysely, sql } from 'kysely';

/**
 * The messaging worker claims the service's own messages (login codes, payment prompts:
 * no merchant) before merchants' messages. Looking them up in messages_due would walk past
 * every queued merchant message due before them (a backlog of thousands after a mail server
 * outage); this index holds only queued own messages, a handful at any time.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('messages_due_own')
    .on('messages')
    // status and merchant_id in the key too, so that SQLite's planner prefers it to messages_due.
    .columns(['status', 'merchant_id', 'next_attempt_at'])
    .where(sql<boolean>`status = 'queued' and merchant_id is null`)
    .execute();
}
