import type { AppContext } from '../context.js';
import { requestOrigin } from '../http/host.js';
import { errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { createPayment, findPayment } from './create-payment.js';
import { toPaymentView } from './payment-view.js';
import { CreatePaymentBody, CreatePaymentBodyDocumented, Payment, SignedHeaders, StatusBody } from './schemas.js';
import { recordUnusedNonce, signedRequests, signerOf, unreadableTypeAsUnknown } from './signed-request.js';

/** Endpoints 5 and 6: signed merchant payment requests. */
export function registerPaymentRoutes(app: App, ctx: AppContext): void {
  const { preValidation, errorHandler } = signedRequests(ctx);
  const signed = {
    config: { signed: true },
    onRequest: unreadableTypeAsUnknown,
    preValidation,
    errorHandler,
    onSend: recordUnusedNonce(ctx),
  };
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
}
