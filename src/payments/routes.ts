import type { AppContext } from '../context.js';
import { requestOrigin } from '../http/host.js';
import { errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { cancelPayment } from './cancel-payment.js';
import { createPayment, findPayment } from './create-payment.js';
import { toPaymentView } from './payment-view.js';
import { CreatePaymentBody, CreatePaymentBodyDocumented, Payment, SignedHeaders, StatusBody } from './schemas.js';
import { signedAsker, signedRoute, signerOf } from './signed-request.js';

/** Endpoints 5 and 6: signed merchant payment requests. */
export function registerPaymentRoutes(app: App, ctx: AppContext): void {
  const signed = signedRoute(ctx);
  const tags = ['Payments'];
  const security = [{ signedRequest: [] }];

  app.post(
    '/api/public/v1/merchant-payments',
    {
      ...signed,
      config: { ...signed.config, bodyDocs: CreatePaymentBodyDocumented },
      schema: {
        tags,
        security,
        summary: 'Create a payment request (signed)',
        headers: SignedHeaders,
        body: CreatePaymentBody,
        response: { 200: Payment, 201: Payment, ...errors(403, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => {
      const { payment, created } = await createPayment(ctx, signerOf(request), request.body);
      return reply.code(created ? 201 : 200).send(toPaymentView(ctx, requestOrigin(request), payment));
    },
  );

  app.post(
    '/api/public/v1/merchant-payments/status',
    {
      ...signed,
      schema: {
        tags,
        security,
        summary: 'The current state of a payment (signed)',
        headers: SignedHeaders,
        body: StatusBody,
        response: { 200: Payment, ...errors(403, 404, 422, 429) },
      },
    },
    async (request) =>
      toPaymentView(ctx, requestOrigin(request), await findPayment(ctx, signerOf(request), request.body.paymentIdentifier)),
  );

  app.post(
    '/api/public/v1/merchant-payments/cancel',
    {
      ...signed,
      schema: {
        tags,
        security,
        summary: 'Call off a payment the payer has not answered (signed)',
        description:
          "A pending or no_user payment becomes declined with reason cancelled_by_merchant, leaves the payer's pending requests, and its callback is sent. Any other status: 409 payment_not_pending.",
        headers: SignedHeaders,
        body: StatusBody,
        response: { 200: Payment, ...errors(403, 404, 409, 422, 429) },
      },
    },
    async (request) =>
      toPaymentView(ctx, requestOrigin(request), await cancelPayment(ctx, signedAsker(request), request.body.paymentIdentifier)),
  );
}
