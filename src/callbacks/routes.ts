import { type Static, Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { AppError } from '../http/errors.js';
import { bearerAuth, errors } from '../http/schemas.js';
import { isoTime } from '../http/time.js';
import type { App } from '../http/types.js';

const Attempt = Type.Object({
  attemptedAt: Type.String(),
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  durationMs: Type.Integer(),
});
const Delivery = Type.Object({
  url: Type.String(),
  status: Type.String({ description: 'pending, delivered or failed' }),
  attempts: Type.Integer(),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  history: Type.Array(Attempt),
});
type DeliveryView = Static<typeof Delivery>;
const CallbackEvent = Type.Object({
  eventId: Type.String(),
  eventType: Type.String(),
  occurredAt: Type.String(),
  paymentIdentifier: Type.String(),
  body: Type.Unknown({ description: 'The exact callback body' }),
  deliveries: Type.Array(Delivery),
});

/** The merchant's view of its callbacks (CONTRACT §7), and manual redelivery. */
export function registerCallbackRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'merchant') };
  const tags = ['Callbacks'];
  const security = bearerAuth;

  app.get(
    '/api/v1/callbacks',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Every callback event of a payment with every delivery attempt',
        querystring: Type.Object({ paymentIdentifier: Type.String({ minLength: 1 }) }),
        response: { 200: Type.Array(CallbackEvent), ...errors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const merchantId = principalOf(request).id;
      const { paymentIdentifier } = request.query;
      const payment = await ctx.store.db
        .selectFrom('payments')
        .select(['id', 'callback_url'])
        .where('id', '=', paymentIdentifier)
        .where('merchant_id', '=', merchantId)
        .executeTakeFirst();
      if (!payment) throw new AppError('not_found', `No payment ${paymentIdentifier}.`);
      const events = await ctx.store.db
        .selectFrom('callback_events')
        .selectAll()
        .where('payment_id', '=', payment.id)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      if (events.length === 0) return [];
      const eventIds = events.map((e) => e.id);
      // One statement for the deliveries and their attempts: one snapshot, so `attempts` and
      // `history` never disagree (a separate read could see an attempt recorded in between).
      const rows = await ctx.store.db
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
      for (const row of rows) {
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
      return events.map((event) => ({
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
    },
  );

  app.post(
    '/api/v1/callbacks/:eventId/redeliver',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Send a callback event again (same eventId), to every URL',
        params: Type.Object({ eventId: Type.String() }),
        response: { 202: Type.Object({ eventId: Type.String(), status: Type.Literal('pending') }), ...errors(401, 403, 404) },
      },
    },
    async (request, reply) => {
      const { eventId } = request.params;
      const merchantId = principalOf(request).id;
      const now = ctx.now();
      const found = await ctx.store.write(async (tx) => {
        const event = await tx
          .selectFrom('callback_events')
          .select('id')
          .where('id', '=', eventId)
          .where('merchant_id', '=', merchantId)
          .executeTakeFirst();
        if (!event) return false;
        const deliveries = await tx
          .selectFrom('callback_deliveries')
          .select(['id', 'status', 'attempts', 'locked_until'])
          .where('event_id', '=', eventId)
          .execute();
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
      if (!found) throw new AppError('not_found', `No callback event ${eventId}.`);
      return reply.code(202).send({ eventId, status: 'pending' as const });
    },
  );
}
