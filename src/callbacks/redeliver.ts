import type { AppContext } from '../context.js';
import { lockedRead } from '../db/database.js';
import { AppError, shown } from '../http/errors.js';

/**
 * The most times an event is sent to one URL, redeliveries included. Every attempt is kept and
 * listed by GET /api/v1/callbacks, so this bounds that list (and what one event can send to
 * an address that may be anyone's): 13 tries and 87 redeliveries.
 */
export const MAX_SENDS_PER_URL = 100;

/**
 * Sends a merchant's callback event again, with the same eventId, to every URL it has a
 * delivery for (POST /api/v1/callbacks/{eventId}/redeliver). Another merchant's event is as
 * unknown as one that does not exist.
 */
export async function redeliverEvent(ctx: AppContext, merchantId: string, eventId: string): Promise<void> {
  const now = ctx.now();
  const found = await ctx.store.write(async (tx) => {
    const event = await tx
      .selectFrom('callback_events')
      .select('id')
      .where('id', '=', eventId)
      .where('merchant_id', '=', merchantId)
      .executeTakeFirst();
    if (!event) return false;
    // Locked until the commit on PostgreSQL: an attempt being recorded meanwhile is either
    // seen finished or waits and then sees the request (worker.ts, record).
    const deliveries = await lockedRead(
      ctx.store.dialect,
      tx
        .selectFrom('callback_deliveries')
        .select(['id', 'status', 'attempts', 'locked_until'])
        .where('event_id', '=', eventId)
        .orderBy('id'),
    ).execute();
    // A try on the wire is not counted in `attempts` until its outcome is recorded.
    const sends = (d: (typeof deliveries)[number]) => d.attempts + (d.status === 'pending' && d.locked_until > now ? 1 : 0);
    if (deliveries.some((d) => sends(d) >= MAX_SENDS_PER_URL)) {
      throw new AppError(
        'redelivery_limit',
        `This event has been sent ${MAX_SENDS_PER_URL} times to one of its URLs, the most allowed; nothing was sent.`,
      );
    }
    for (const d of deliveries) {
      // One more try now; a delivery still retrying keeps the tries it has left, and a
      // failed one (all its tries made) fails again if this one fails too. `attempts`
      // keeps counting every try. One on the wire right now keeps its lease (never two
      // concurrent sends) and is tried again as soon as that attempt is recorded.
      const onTheWire = d.status === 'pending' && d.locked_until > now;
      await tx
        .updateTable('callback_deliveries')
        .set({
          status: 'pending',
          next_attempt_at: now,
          redeliver_requested: onTheWire ? 1 : 0,
          updated_at: now,
        })
        .where('id', '=', d.id)
        .execute();
    }
    return true;
  });
  if (!found) throw new AppError('not_found', `No callback event ${shown(eventId)}.`);
}
