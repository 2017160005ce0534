import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { requestOrigin } from '../http/host.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { cancelPayment } from './cancel-payment.js';
import { toPaymentView } from './payment-view.js';
import { Payment } from './schemas.js';

/** The cancellation of CONTRACT §11 from the dashboard, with the merchant's session token. */
export function registerDashboardPaymentActions(app: App, ctx: AppContext): void {
  app.post(
    '/api/v1/payments/:paymentIdentifier/cancel',
    {
      onRequest: requireSession(ctx, 'merchant'),
      schema: {
        tags: ['Payments'],
        security: bearerAuth,
        summary: 'Call off a payment the payer has not answered (the dashboard)',
        params: Type.Object({ paymentIdentifier: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: { 200: Payment, ...errors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      const asker = { merchantId: principalOf(request).id, signer: null };
      return toPaymentView(ctx, requestOrigin(request), await cancelPayment(ctx, asker, request.params.paymentIdentifier));
    },
  );
}
