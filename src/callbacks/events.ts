import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { PaymentTable } from '../db/schema.js';
import { isoTime } from '../http/time.js';
import { toCallbackPayment } from '../payments/payment-view.js';
import { randomId } from '../security/tokens.js';

/** The callback events (CONTRACT §7 and §11). */
export type EventType = 'payment.status_changed' | 'refund.succeeded';

/** A payment's status change: the event of CONTRACT §7. */
export function enqueueStatusEvent(tx: Tx, payment: PaymentTable, resultUrl: string, now: number): Promise<string> {
  return enqueueEvent(tx, payment, resultUrl, 'payment.status_changed', {}, now);
}

/**
 * Writes a callback event about a payment, in the transaction of the change itself
 * (transactional outbox): one event, one delivery per distinct URL (urls.callbackUrl and
 * the POS resultUrl), all sharing the eventId. The worker sends them, signed with the key
 * that created the payment. `extra` goes in the body before `payment` (a refund's `refund`).
 */
export async function enqueueEvent(
  tx: Tx,
  payment: PaymentTable,
  resultUrl: string,
  eventType: EventType,
  extra: Record<string, unknown>,
  now: number,
): Promise<string> {
  const eventId = randomId('evt_');
  const payload = JSON.stringify({
    eventId,
    eventType,
    occurredAt: isoTime(now),
    ...extra,
    payment: toCallbackPayment(payment),
  });
  const event = {
    id: eventId,
    payment_id: payment.id,
    merchant_id: payment.merchant_id,
    api_key_id: payment.api_key_id,
    pos_id: payment.pos_id,
    payload,
    created_at: now,
  };
  await hotQuery(tx, 'callbacks.insert-event', Object.values(event), () => tx.insertInto('callback_events').values(event));
  // "Also to the POS resultUrl when it is a different URL" (CONTRACT §7): the same URL written
  // another way (scheme or host case, the default port) is not a different one.
  const urls = sameUrl(payment.callback_url, resultUrl) ? [payment.callback_url] : [payment.callback_url, resultUrl];
  const deliveries = urls.map((url) => ({
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
  }));
  await hotQuery(tx, `callbacks.insert-deliveries-${deliveries.length}`, deliveries.flatMap(Object.values), () =>
    tx.insertInto('callback_deliveries').values(deliveries),
  );
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
