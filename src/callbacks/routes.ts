import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { AppError } from '../http/errors.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';

const iso = (ms: number) => new Date(ms).toISOString();

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
        .select('id')
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
      const deliveries = await ctx.store.db
        .selectFrom('callback_deliveries')
        .selectAll()
        .where('event_id', 'in', eventIds)
        .orderBy('created_at')
        .execute();
      const attempts = deliveries.length
        ? await ctx.store.db
            .selectFrom('callback_attempts')
            .selectAll()
            .where(
              'delivery_id',
              'in',
              deliveries.map((d) => d.id),
            )
            .orderBy('attempted_at')
            .execute()
        : [];
      return events.map((event) => ({
        eventId: event.id,
        eventType: JSON.parse(event.payload).eventType as string,
        occurredAt: iso(event.created_at),
        paymentIdentifier: event.payment_id,
        body: JSON.parse(event.payload) as unknown,
        deliveries: deliveries
          .filter((d) => d.event_id === event.id)
          .map((d) => ({
            url: d.url,
            status: d.status,
            attempts: d.attempts,
            nextAttemptAt: d.status === 'pending' ? iso(d.next_attempt_at) : null,
            lastError: d.last_error,
            history: attempts
              .filter((a) => a.delivery_id === d.id)
              .map((a) => ({ attemptedAt: iso(a.attempted_at), statusCode: a.status_code, error: a.error, durationMs: a.duration_ms })),
          })),
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
