import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { AppError, shown } from '../http/errors.js';
import { CursorParam, LimitParam, limitOf, PageOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { createRefund } from './create-refund.js';
import { toRefundView } from './refund-view.js';
import { CreateRefundBody, CreateRefundBodyDocumented, Refund } from './schemas.js';

const PaymentParams = Type.Object({ paymentIdentifier: Type.String({ minLength: 1, maxLength: 200 }) });
const { paymentIdentifier: _, ...refundFields } = CreateRefundBody.properties;
const { paymentIdentifier: __, ...refundFieldsDocumented } = CreateRefundBodyDocumented.properties;

/** Refunds from the dashboard, with the merchant's session token: the same rules as the signed endpoint. */
export function registerMerchantRefundRoutes(app: App, ctx: AppContext): void {
  const session = { onRequest: requireSession(ctx, 'merchant') };
  const tags = ['Refunds'];

  app.post(
    '/api/v1/payments/:paymentIdentifier/refunds',
    {
      ...session,
      config: { bodyDocs: Type.Object(refundFieldsDocumented) },
      schema: {
        tags,
        security: bearerAuth,
        summary: 'Refund a paid payment, whole or in part (the dashboard)',
        params: PaymentParams,
        body: Type.Object(refundFields),
        response: { 200: Refund, 201: Refund, ...errors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const asker = { merchantId: principalOf(request).id, signer: null };
      const { refund, created } = await createRefund(ctx, asker, { ...request.body, paymentIdentifier: request.params.paymentIdentifier });
      return reply.code(created ? 201 : 200).send(toRefundView(refund));
    },
  );

  app.get(
    '/api/v1/payments/:paymentIdentifier/refunds',
    {
      ...session,
      schema: {
        tags,
        security: bearerAuth,
        summary: "A payment's refunds, newest first",
        params: PaymentParams,
        querystring: Type.Object({ limit: LimitParam, cursor: CursorParam }),
        response: { 200: PageOf(Refund), ...errors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const merchantId = principalOf(request).id;
      const { paymentIdentifier } = request.params;
      const db = ctx.store.db;
      const payment = await db
        .selectFrom('payments')
        .select('id')
        .where('id', '=', paymentIdentifier)
        .where('merchant_id', '=', merchantId)
        .executeTakeFirst();
      if (!payment) throw new AppError('not_found', `No payment ${shown(paymentIdentifier)}.`);
      const scope = `refunds:${merchantId}:${payment.id}`;
      const limit = limitOf(request.query.limit);
      const start = startOf(ctx.cursors, scope, request.query.cursor);
      let query = db.selectFrom('refunds').selectAll().where('payment_id', '=', payment.id);
      if (start) query = query.where(beyond('created_at', 'id', start, 'desc'));
      const rows = await query
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit + 1)
        .execute();
      return ctx.cursors.page(scope, rows, limit, createdKey, toRefundView);
    },
  );
}
