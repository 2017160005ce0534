import type { AppContext } from '../context.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import { AppError, shown } from '../http/errors.js';
import { limitOf, type Page, type PageQuery } from '../http/pagination.js';
import { isoTime } from '../http/time.js';
import type { CallbackEventView, DeliveryView } from './schemas.js';

/**
 * A page of the callback events of a merchant's payment, oldest first, each with its deliveries
 * (the payment's callbackUrl first, then the POS resultUrl) and every attempt of each
 * (CONTRACT §7). Another merchant's payment is as unknown as one that does not exist.
 */
export async function listCallbackEvents(
  ctx: AppContext,
  merchantId: string,
  query: PageQuery & { paymentIdentifier: string },
): Promise<Page<CallbackEventView>> {
  const { paymentIdentifier } = query;
  // The cursor is of this merchant's list of this payment's events, and of no other.
  const scope = `callbacks:${merchantId}:${paymentIdentifier}`;
  const limit = limitOf(query.limit);
  const after = startOf(ctx.cursors, scope, query.cursor);
  const payment = await ctx.store.db
    .selectFrom('payments')
    .select(['id', 'callback_url'])
    .where('id', '=', paymentIdentifier)
    .where('merchant_id', '=', merchantId)
    .executeTakeFirst();
  if (!payment) throw new AppError('not_found', `No payment ${shown(paymentIdentifier)}.`);
  let select = ctx.store.db.selectFrom('callback_events').selectAll().where('payment_id', '=', payment.id);
  if (after !== undefined) select = select.where(beyond('created_at', 'id', after, 'asc'));
  const rows = await select
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit + 1)
    .execute();
  const page = ctx.cursors.page(scope, rows, limit, createdKey, (event) => event);
  const events = page.data;
  if (events.length === 0) return { data: [], nextCursor: page.nextCursor };
  const eventIds = events.map((e) => e.id);
  // One statement for the deliveries and their attempts: one snapshot, so `attempts` and
  // `history` never disagree (a separate read could see an attempt recorded in between).
  const attempts = await ctx.store.db
    .selectFrom('callback_deliveries as d')
    .leftJoin('callback_attempts as a', 'a.delivery_id', 'd.id')
    .select([
      'd.id',
      'd.event_id',
      'd.url',
      'd.status',
      'd.attempts',
      'd.next_attempt_at',
      'd.last_error',
      'a.attempted_at',
      'a.status_code',
      'a.error',
      'a.duration_ms',
    ])
    .where('d.event_id', 'in', eventIds)
    .orderBy('d.created_at')
    .orderBy('d.id')
    .orderBy('a.attempted_at')
    .execute();
  const deliveries = new Map<string, { event: string; view: DeliveryView }>();
  for (const row of attempts) {
    let delivery = deliveries.get(row.id);
    if (!delivery) {
      delivery = {
        event: row.event_id,
        view: {
          url: row.url,
          status: row.status,
          attempts: row.attempts,
          nextAttemptAt: row.status === 'pending' ? isoTime(row.next_attempt_at) : null,
          lastError: row.last_error,
          history: [],
        },
      };
      deliveries.set(row.id, delivery);
    }
    if (row.attempted_at !== null) {
      delivery.view.history.push({
        attemptedAt: isoTime(row.attempted_at),
        statusCode: row.status_code,
        error: row.error,
        durationMs: row.duration_ms ?? 0,
      });
    }
  }
  const data = events.map((event) => ({
    eventId: event.id,
    eventType: JSON.parse(event.payload).eventType as string,
    occurredAt: isoTime(event.created_at),
    paymentIdentifier: event.payment_id,
    body: JSON.parse(event.payload) as unknown,
    // urls.callbackUrl's delivery first, then the POS resultUrl's.
    deliveries: [...deliveries.values()]
      .filter((d) => d.event === event.id)
      .map((d) => d.view)
      .sort((a, b) => Number(b.url === payment.callback_url) - Number(a.url === payment.callback_url)),
  }));
  return { data, nextCursor: page.nextCursor };
}
