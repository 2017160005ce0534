import type { Tx } from '../db/database.js';
import type { PaymentTable } from '../db/schema.js';
import { isoTime } from '../http/time.js';
import { toCallbackPayment } from '../payments/payment-view.js';
import { randomId } from '../security/tokens.js';

export const EVENT_TYPE = 'payment.status_changed';

/**
 * Writes the callback event of a status change, in the transaction of the change itself
 * (transactional outbox): one event, one delivery per distinct URL (urls.callbackUrl and
 * the POS resultUrl), all sharing the eventId. The worker sends them.
 */
export async function enqueueStatusEvent(tx: Tx, payment: PaymentTable, resultUrl: string, now: number): Promise<string> {
  const eventId = randomId('evt_');
  const payload = JSON.stringify({
    eventId,
    eventType: EVENT_TYPE,
    occurredAt: isoTime(now),
    payment: toCallbackPayment(payment),
  });
  await tx
    .insertInto('callback_events')
    .values({
      id: eventId,
      payment_id: payment.id,
      merchant_id: payment.merchant_id,
      api_key_id: payment.api_key_id,
      pos_id: payment.pos_id,
      payload,
      created_at: now,
    })
    .execute();
  // "Also to the POS resultUrl when it is a different URL" (CONTRACT §7): the same URL written
  // another way (scheme or host case, the default port) is not a different one.
  const urls = sameUrl(payment.callback_url, resultUrl) ? [payment.callback_url] : [payment.callback_url, resultUrl];
  await tx
    .insertInto('callback_deliveries')
    .values(
      urls.map((url) => ({
        id: randomId('dlv_'),
        event_id: eventId,
        url,
        status: 'pending' as const,
        attempts: 0,
        next_attempt_at: now,
        locked_until: 0,
        last_error: null,
        created_at: now,
        updated_at: now,
      })),
    )
    .execute();
  return eventId;
}

/** Whether two absolute URLs are the same once normalised as WHATWG URL does (case of scheme and host, default port, dot segments). */
export function sameUrl(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return false;
  }
}
