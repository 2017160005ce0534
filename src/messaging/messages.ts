import type { AppContext } from '../context.js';
import { hotQuery } from '../db/hot-query.js';
import type { MessageTable } from '../db/schema.js';
import type { Attempted } from './messenger.js';
import type { ValidMessage } from './validate.js';

/** How long POST /api/messages waits for the first attempt before answering `queued`. */
const FIRST_ATTEMPT_WAIT_MS = 2000;

/** A live messaging key and the merchant it belongs to. */
export interface MessagingKey {
  id: string;
  merchantId: string;
}

/**
 * Endpoint 7: stores a merchant's message (delivered there and then by the embedded outbox),
 * then makes its first attempt and waits up to FIRST_ATTEMPT_WAIT_MS for the outcome, so the
 * answer can say sent or delivered; otherwise it is still queued and the worker goes on.
 */
export async function sendMessage(
  ctx: AppContext,
  key: MessagingKey,
  valid: ValidMessage,
): Promise<{ stored: MessageTable; outcome: Attempted }> {
  const now = ctx.now();
  const stored = await ctx.store.write((tx) =>
    ctx.messenger.enqueue(
      tx,
      {
        merchant_id: key.merchantId,
        messaging_key_id: key.id,
        purpose: 'api',
        type: valid.type,
        email: valid.type === 'email' ? valid.email : null,
        subject: valid.type === 'email' ? valid.subject : null,
        content_type: valid.type === 'email' ? valid.contentType : null,
        phone_country_code: valid.type === 'sms' ? valid.countryCode : null,
        phone_number: valid.type === 'sms' ? valid.number : null,
        content: valid.content,
        segments: valid.type === 'sms' ? valid.segments : null,
      },
      now,
      true,
    ),
  );
  if (stored.status !== 'queued') return { stored, outcome: { status: stored.status, invalidRecipient: false } };
  // The first attempt starts now; the answer carries its outcome if it comes in time. The
  // message is stored whatever happens to the attempt's record: the answer is never an error.
  const attempt = ctx.messenger.sendClaimed(stored).catch((err: unknown): Attempted => {
    ctx.log.error({ err, messageId: stored.id }, 'message attempt not recorded');
    return { status: 'queued', invalidRecipient: false };
  });
  const timeout = new Promise<Attempted>((resolve) =>
    setTimeout(() => resolve({ status: 'queued', invalidRecipient: false }), FIRST_ATTEMPT_WAIT_MS).unref(),
  );
  return { stored, outcome: await Promise.race([attempt, timeout]) };
}

/**
 * Endpoint 8: the message with this id as the key's merchant may read it. The service's own
 * messages (OTPs, prompts) were sent by no merchant: unknown here, as is an unknown id.
 */
export async function findMessage(
  ctx: AppContext,
  key: MessagingKey,
  id: string,
): Promise<{ found: MessageTable } | 'not_found' | 'access_denied'> {
  const db = ctx.store.db;
  const { rows } = await hotQuery(db, 'messaging.get', [id], () => db.selectFrom('messages').selectAll().where('id', '=', id));
  const message = rows[0] as MessageTable | undefined;
  if (!message || message.merchant_id === null) return 'not_found';
  if (message.merchant_id !== key.merchantId) return 'access_denied';
  return { found: message };
}
