import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { CursorParam, LimitParam, PageOf } from '../http/pagination.js';
import { WindowLimiter } from '../http/rate-limit.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { listCallbackEvents } from './callback-log.js';
import { redeliverEvent } from './redeliver.js';
import { CallbackEvent } from './schemas.js';

/**
 * Redeliveries a merchant may ask for a second. Each is a POST to every URL of the event, and
 * a callback URL may be anybody's public address: unbounded, a merchant could have Lipa flood it.
 */
export const REDELIVERIES_PER_SECOND = 10;

/** The merchant's view of its callbacks (CONTRACT §7), and manual redelivery. */
export function registerCallbackRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'merchant') };
  const redeliveries = new WindowLimiter(REDELIVERIES_PER_SECOND, 1000, ctx.now);
  const tags = ['Callbacks'];
  const security = bearerAuth;

  app.get(
    '/api/v1/callbacks',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'The callback events of a payment, oldest first, with every delivery attempt',
        querystring: Type.Object({ paymentIdentifier: Type.String({ minLength: 1 }), limit: LimitParam, cursor: CursorParam }),
        response: { 200: PageOf(CallbackEvent), ...errors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      return listCallbackEvents(ctx, principalOf(request).id, request.query);
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
        response: { 202: Type.Object({ eventId: Type.String(), status: Type.Literal('pending') }), ...errors(401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const { eventId } = request.params;
      redeliveries.hit(principalOf(request).id);
      await redeliverEvent(ctx, principalOf(request).id, eventId);
      return reply.code(202).send({ eventId, status: 'pending' as const });
    },
  );
}
