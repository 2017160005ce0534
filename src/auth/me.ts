import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { AppError } from '../http/errors.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';

export const Me = Type.Object({
  type: Type.Union([Type.Literal('merchant'), Type.Literal('payer')]),
  id: Type.String({ description: 'merchantId or payerId' }),
  login: Type.String({ description: 'What the caller logs in with: the email of a merchant, the phone digits of a payer' }),
  phone: Type.Optional(Type.String({ description: 'Payers only: the wallet phone' })),
  name: Type.String(),
});

/** `GET /api/v1/me`: who the bearer token belongs to (the pages need the merchantId). */
export function registerMeRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/api/v1/me',
    {
      onRequest: requireSession(ctx, 'any'),
      schema: {
        tags: ['Merchant session'],
        security: bearerAuth,
        summary: 'The merchant or payer the token belongs to',
        response: { 200: Me, ...errors(401) },
      },
    },
    async (request) => {
      const { type, id } = principalOf(request);
      if (type === 'merchant') {
        const merchant = await ctx.store.db.selectFrom('merchants').select(['login', 'name']).where('id', '=', id).executeTakeFirst();
        if (!merchant) throw new AppError('unauthorized', 'The token is invalid or has expired; log in again.');
        return { type, id, login: merchant.login, name: merchant.name };
      }
      const payer = await ctx.store.db.selectFrom('payers').select(['phone', 'name']).where('id', '=', id).executeTakeFirst();
      if (!payer) throw new AppError('unauthorized', 'The token is invalid or has expired; log in again.');
      return { type, id, login: payer.phone, phone: payer.phone, name: payer.name };
    },
  );
}
