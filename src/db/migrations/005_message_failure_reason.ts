import type { Kysely } from 'kysely';

/**
 * A failed message's reason as its sender may read it (the lookup's `error`), written by the
 * transport when the message fails. Before this, the reason was worked out by reading
 * last_error's text back; that reading is kept here once, to fill the column for messages
 * that failed before it existed.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  // SQLite runs migrations outside a transaction: if a start was cut short after the column
  // was added but before this migration was recorded, the column is already there.
  const messages = (await db.introspection.getTables()).find((t) => t.name === 'messages');
  if (!messages?.columns.some((c) => c.name === 'failure_reason')) {
    await db.schema.alterTable('messages').addColumn('failure_reason', 'text').execute();
  }
  // PostgreSQL runs each migration in a transaction already; on SQLite the backfill gets its own.
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const inTransaction = (fill: (tx: Kysely<any>) => Promise<void>) => (db.isTransaction ? fill(db) : db.transaction().execute(fill));
  await inTransaction(async (tx) => {
    const failed: { id: string; type: 'email' | 'sms'; last_error: string }[] = await tx
      .selectFrom('messages')
      .select(['id', 'type', 'last_error'])
      .where('status', '=', 'failed')
      .where('last_error', 'is not', null)
      .execute();
    // One update per distinct reason (a few), in chunks, rather than one per message.
    const byReason = new Map<string, string[]>();
    for (const message of failed) {
      const reason = readBack(message);
      byReason.set(reason, [...(byReason.get(reason) ?? []), message.id]);
    }
    for (const [reason, ids] of byReason) {
      for (let i = 0; i < ids.length; i += 500) {
        await tx
          .updateTable('messages')
          .set({ failure_reason: reason })
          .where('id', 'in', ids.slice(i, i + 500))
          .execute();
      }
    }
  });
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
