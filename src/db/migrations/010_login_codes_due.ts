import { type Kysely, sql } from 'kysely';

/**
 * The messaging worker claims login codes before the service's other messages (payment
 * prompts, which a merchant can send by the thousand): this index holds only queued login
 * codes, a handful at any time, so finding them never walks a backlog of prompts.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('messages_due_codes')
    .ifNotExists()
    .on('messages')
    // status and purpose in the key too, as in messages_due_own, so that SQLite's planner prefers it.
    .columns(['status', 'purpose', 'next_attempt_at'])
    .where(sql<boolean>`status = 'queued' and purpose = 'otp'`)
    .execute();
}
