import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { createdKey, startOf } from '../db/keyset.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { CursorParam, LimitParam, limitOf, PageOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { merchantMessagesQuery } from './list-messages.js';
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
        querystring: Type.Object({ limit: LimitParam, cursor: CursorParam }),
        response: { 200: PageOf(StoredMessage), ...errors(401, 403, 422) },
      },
    },
    async (request) => {
      const merchantId = principalOf(request).id;
      const scope = `messages:${merchantId}`;
      const limit = limitOf(request.query.limit);
      const after = startOf(ctx.cursors, scope, request.query.cursor);
      const rows = await merchantMessagesQuery(ctx.store.db, merchantId, limit + 1, after).execute();
      return ctx.cursors.page(scope, rows, limit, createdKey, toStoredMessage);
    },
  );
}
