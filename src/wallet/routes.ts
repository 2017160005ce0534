import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { PageOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { assertPin } from './pin.js';
import { AcceptBody, Answer, PaymentParams, Wallet, WalletPayment, WalletPaymentsQuery } from './schemas.js';
import { settlePayment } from './settle.js';
import { listWalletPayments, walletOf } from './wallet.js';

/** The payer side (CONTRACT §6): balance, payments, approve with PIN, decline. */
export function registerWalletRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'payer') };
  const tags = ['Wallet'];
  const security = bearerAuth;

  app.get(
    '/api/v1/wallet',
    { ...common, schema: { tags, security, summary: "The payer's wallet", response: { 200: Wallet, ...errors(401, 403) } } },
    async (request) => walletOf(ctx, principalOf(request).id),
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
        response: { 200: PageOf(WalletPayment), ...errors(401, 403, 422) },
      },
    },
    async (request) => listWalletPayments(ctx, principalOf(request).id, request.query),
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
        response: { 200: Answer, ...errors(401, 403, 404, 409, 422) },
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
        response: { 200: Answer, ...errors(401, 403, 404, 409) },
      },
    },
    async (request) => {
      await settlePayment(ctx, principalOf(request).id, request.params.paymentIdentifier, 'decline');
      // CONTRACT §6: `{status: "declined"}`; the reason (declined_by_payer) is the payer's own act.
      return { status: 'declined' };
    },
  );
}
