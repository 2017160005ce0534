import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { createPointOfSale, listPointsOfSale } from './points-of-sale.js';
import { PointOfSale, PosBody, PosBodyDocumented } from './schemas.js';

/** Endpoint 4 and the merchant's list of its points of sale. */
export function registerPosRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'merchant') };
  const tags = ['Points of sale'];

  app.post(
    '/api/v1/points-of-sale',
    {
      ...common,
      config: { bodyDocs: PosBodyDocumented },
      schema: {
        tags,
        security: bearerAuth,
        summary: 'Register a point of sale',
        body: PosBody,
        response: { 201: PointOfSale, ...errors(401, 403, 409, 422) },
      },
    },
    async (request, reply) => reply.code(201).send(await createPointOfSale(ctx, principalOf(request).id, request.body)),
  );

  app.get(
    '/api/v1/points-of-sale',
    {
      ...common,
      schema: {
        tags,
        security: bearerAuth,
        summary: "List the caller's points of sale",
        response: { 200: Type.Array(PointOfSale), ...errors(401, 403) },
      },
    },
    async (request) => listPointsOfSale(ctx, principalOf(request).id),
  );
}
