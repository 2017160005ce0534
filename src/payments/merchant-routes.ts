import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { createdKey, startOf } from '../db/keyset.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { requestOrigin } from '../http/host.js';
import { CursorParam, LimitParam, limitOf, PageOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { expireDuePayments } from './expire.js';
import { listPayments } from './list-payments.js';
import { toPaymentView } from './payment-view.js';
import { Payment } from './schemas.js';

export const PaymentListQuery = Type.Object({
  status: Type.Optional(
    Type.Union(
      [Type.Literal('pending'), Type.Literal('no_user'), Type.Literal('paid'), Type.Literal('declined'), Type.Literal('expired')],
      {
        description: 'Only payments in this status',
      },
    ),
  ),
  orderId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Only payments with exactly this orderId' })),
  limit: LimitParam,
  cursor: CursorParam,
});

/** The merchant's payments with its session token (the dashboard), beside the signed API. */
export function registerMerchantPaymentRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/api/v1/payments',
    {
      onRequest: requireSession(ctx, 'merchant'),
      schema: {
        tags: ['Payments'],
        security: bearerAuth,
        summary: "The caller's payments, newest first",
        querystring: PaymentListQuery,
        response: { 200: PageOf(Payment), ...errors(401, 403, 422) },
      },
    },
    async (request) => {
      const { status, orderId, cursor } = request.query;
      const merchantId = principalOf(request).id;
      // A cursor is this merchant's: another's is refused, never read as a place in this list.
      const scope = `payments:${merchantId}`;
      const limit = limitOf(request.query.limit);
      const after = startOf(ctx.cursors, scope, cursor);
      await expireDuePayments(ctx, { merchantId });
      const rows = await listPayments(ctx, merchantId, { status, orderId, limit: limit + 1, after });
      return ctx.cursors.page(scope, rows, limit, createdKey, (row) => toPaymentView(ctx, requestOrigin(request), row));
    },
  );
}
