import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { LimitParam, limitOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { toStoredMessage } from './responses.js';

/** A message as GET /api/messages/{id} shows it (its `data`): SMS and email fields both optional. */
export const StoredMessage = Type.Object({
  id: Type.String(),
  status: Type.String({ description: 'queued, sent, delivered or failed' }),
  type: Type.String({ description: 'email or sms' }),
  content: Type.String(),
  created_at: Type.String(),
  segments: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  phone: Type.Optional(
    Type.Object({ number: Type.String({ description: 'Masked but for the last three digits' }), country_code: Type.String() }),
  ),
  email: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  subject: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  content_type: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});

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
