import type { AppContext } from '../context.js';
import { errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { SignedHeaders } from '../payments/schemas.js';
import { signedAsker, signedRoute, signerOf } from '../payments/signed-request.js';
import { createRefund, findRefund } from './create-refund.js';
import { toRefundView } from './refund-view.js';
import { CreateRefundBody, CreateRefundBodyDocumented, Refund, RefundStatusBody } from './schemas.js';

/** Refunds (CONTRACT §11): signed like endpoints 5 and 6. */
export function registerRefundRoutes(app: App, ctx: AppContext): void {
  const signed = signedRoute(ctx);
  const tags = ['Refunds'];
  const security = [{ signedRequest: [] }];

  app.post(
    '/api/public/v1/merchant-payments/refunds',
    {
      ...signed,
      config: { ...signed.config, bodyDocs: CreateRefundBodyDocumented },
      schema: {
        tags,
        security,
        summary: 'Refund a paid payment, whole or in part (signed)',
        headers: SignedHeaders,
        body: CreateRefundBody,
        response: { 200: Refund, 201: Refund, ...errors(403, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => {
      const { refund, created } = await createRefund(ctx, signedAsker(request), request.body);
      return reply.code(created ? 201 : 200).send(toRefundView(refund));
    },
  );

  app.post(
    '/api/public/v1/merchant-payments/refunds/status',
    {
      ...signed,
      schema: {
        tags,
        security,
        summary: 'One refund (signed)',
        headers: SignedHeaders,
        body: RefundStatusBody,
        response: { 200: Refund, ...errors(403, 404, 422, 429) },
      },
    },
    async (request) => toRefundView(await findRefund(ctx, signerOf(request), request.body.refundIdentifier)),
  );
}
