import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { LimitParam, limitOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { StoredMessage, toStoredMessage } from './responses.js';

/** The messages a merchant sent through the messaging API, with its session token (the dashboard). */
export function registerMerchantMessageRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/api/v1/messages',
    {
      onRequest: requireSession(ctx, 'merchant'),
      schema: {
        tags: ['Messaging'],
        security: bearerAuth,
        summary: 'Messages the caller sent through the messaging API, newest first',
        querystring: Type.Object({ limit: LimitParam }),
        response: { 200: Type.Array(StoredMessage), ...errors(401, 403, 422) },
      },
    },
    async (request) => {
      const rows = await ctx.store.db
        .selectFrom('messages')
        .selectAll()
        .where('merchant_id', '=', principalOf(request).id)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limitOf(request.query.limit))
        .execute();
      return rows.map(toStoredMessage);
    },
  );
}
