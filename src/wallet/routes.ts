import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { bearerAuth, errors } from '../http/schemas.js';
import { isoTime } from '../http/time.js';
import type { App } from '../http/types.js';
import { accountId, balanceOf } from '../ledger/ledger.js';
import { CURRENCY, fromMinorUnits } from '../ledger/money.js';
import { expireDuePayments } from '../payments/expire.js';
import { assertPin } from './pin.js';
import { AcceptBody, Answer, PaymentParams, Wallet, WalletPayment, WalletPaymentsQuery } from './schemas.js';
import { settlePayment } from './settle.js';

/** The payer side (CONTRACT §6): balance, payments, approve with PIN, decline. */
export function registerWalletRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'payer') };
  const tags = ['Wallet'];
  const security = bearerAuth;

  app.get(
    '/api/v1/wallet',
    { ...common, schema: { tags, security, summary: "The payer's wallet", response: { 200: Wallet, ...errors(401, 403) } } },
    async (request) => {
      const payerId = principalOf(request).id;
      const payer = await ctx.store.db.selectFrom('payers').select('phone').where('id', '=', payerId).executeTakeFirstOrThrow();
      return {
        phone: payer.phone,
        balance: fromMinorUnits((await balanceOf(ctx.store.db, accountId('wallet', payerId))) ?? 0),
        currency: CURRENCY,
      };
    },
  );

  app.get(
    '/api/v1/wallet/payments',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: "The payer's payments, newest first",
        querystring: WalletPaymentsQuery,
        response: { 200: Type.Array(WalletPayment), ...errors(401, 403, 422) },
      },
    },
    async (request) => {
      await expireDuePayments(ctx, { payerId: principalOf(request).id });
      let query = ctx.store.db
        .selectFrom('payments as p')
        .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
        .selectAll('p')
        .select('s.pos_company_name')
        .where('p.payer_id', '=', principalOf(request).id);
      if (request.query.status) query = query.where('p.status', '=', request.query.status);
      const rows = await query.orderBy('p.created_at', 'desc').limit(200).execute();
      return rows.map((p) => ({
        paymentIdentifier: p.id,
        status: p.status,
        ...(p.status === 'declined' && p.reason ? { reason: p.reason } : {}),
        merchantName: p.pos_company_name,
        orderId: p.order_id,
        description: p.description,
        amount: fromMinorUnits(p.amount),
        currency: p.currency,
        createdAt: isoTime(p.created_at),
        updatedAt: isoTime(p.updated_at),
        expiresAt: isoTime(p.expires_at),
      }));
    },
  );

  app.post(
    '/api/v1/wallet/payments/:paymentIdentifier/accept',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Approve a pending payment with the wallet PIN',
        params: PaymentParams,
        body: AcceptBody,
        response: { 200: Answer, ...errors(401, 403, 409, 422) },
      },
    },
    async (request) => {
      const payerId = principalOf(request).id;
      await assertPin(ctx, payerId, request.body.pin);
      const payment = await settlePayment(ctx, payerId, request.params.paymentIdentifier, 'accept');
      return { status: payment.status, ...(payment.reason ? { reason: payment.reason } : {}) };
    },
  );

  app.post(
    '/api/v1/wallet/payments/:paymentIdentifier/decline',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Decline a pending payment',
        params: PaymentParams,
        response: { 200: Answer, ...errors(401, 403, 409) },
      },
    },
    async (request) => {
      await settlePayment(ctx, principalOf(request).id, request.params.paymentIdentifier, 'decline');
      // CONTRACT §6: `{status: "declined"}`; the reason (declined_by_payer) is the payer's own act.
      return { status: 'declined' };
    },
  );
}
