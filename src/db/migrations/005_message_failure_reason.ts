import type { Kysely } from 'kysely';

/**
 * A failed message's reason as its sender may read it (the lookup's `error`), written by the
 * transport when the message fails. Before this, the reason was worked out by reading
 * last_error's text back; that reading is kept here once, to fill the column for messages
 * that failed before it existed.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('failure_reason', 'text').execute();
  const failed: { id: string; type: 'email' | 'sms'; last_error: string }[] = await db
    .selectFrom('messages')
    .select(['id', 'type', 'last_error'])
    .where('status', '=', 'failed')
    .where('last_error', 'is not', null)
    .execute();
  for (const message of failed) {
    await db
      .updateTable('messages')
      .set({ failure_reason: readBack(message) })
      .where('id', '=', message.id)
      .execute();
  }
}

/** The reading of last_error the lookup used until this migration. */
function readBack(message: { type: 'email' | 'sms'; last_error: string }): string {
  const error = message.last_error;
  const server = message.type === 'sms' ? 'the SMS centre' : 'the mail server';
  if (error.startsWith('gave up'))
    return `Not sent: ${server} could not be reached or would not take it for as long as the message was worth sending.`;
  const refused = 'SMSC rejected submit_sm: ';
  if (error.startsWith(refused)) return `Refused by ${server}: ${error.slice(refused.length)}.`;
  if (/^[A-Z]{5,8}( err:\S+)?$/.test(error)) return `The ${server.slice(4)} reported it not delivered: ${error}.`;
  const smtp = [...error.matchAll(/\b([45][0-9]{2})[ -](?:([45]\.[0-9]{1,3}\.[0-9]{1,3})\b)?/g)].at(-1);
  if (message.type === 'email' && smtp) return `Refused by the mail server: ${smtp[1]}${smtp[2] ? ` ${smtp[2]}` : ''}.`;
  return `Refused by ${server}.`;
}
