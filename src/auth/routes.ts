import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import type { Audience } from '../db/schema.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { perIpLimit, WindowLimiter } from '../http/rate-limit.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { confirmMockOtp, confirmOtp } from './confirm.js';
import { startLogin } from './login.js';
import { ConfirmBody, LoginBody, LoginResponse, TokenResponse } from './schemas.js';

/**
 * The per-IP limit of endpoints 1-3 (RATE_LIMIT_AUTH_IP_PER_MIN): one count per process,
 * shared by the main and the mock listener, so two listeners do not double it.
 */
const ipLimits = new WeakMap<AppContext, ReturnType<typeof perIpLimit>>();

function ipLimitOf(ctx: AppContext): ReturnType<typeof perIpLimit> {
  let limit = ipLimits.get(ctx);
  if (!limit) {
    limit = perIpLimit(new WindowLimiter(ctx.config.rateLimitAuthIpPerMin, 60_000, ctx.now));
    ipLimits.set(ctx, limit);
  }
  return limit;
}

/** Endpoints 1 and 2 (and 3: the same two paths on the mock listener). */
export function registerAuthRoutes(app: App, ctx: AppContext, audience: Audience): void {
  const ipLimit = ipLimitOf(ctx);
  const tags = [audience === 'main' ? 'Merchant session' : 'Mock environment'];

  app.post(
    '/api/v1/authorization',
    {
      onRequest: ipLimit,
      schema: {
        tags,
        summary: 'Log in with login and password; an OTP is sent',
        body: LoginBody,
        // 403: a merchant the operator suspended (the mock environment takes payers only).
        response: { 200: LoginResponse, ...errors(...(audience === 'main' ? [401, 403] : [401]), 422, 429) },
      },
    },
    async (request) => startLogin(ctx, request.body, audience),
  );

  app.post(
    '/api/v1/authorization/confirm',
    {
      onRequest: ipLimit,
      schema: {
        tags,
        summary: 'Confirm the OTP and receive a bearer token',
        body: ConfirmBody,
        response: { 200: TokenResponse, ...errors(...(audience === 'main' ? [401, 403] : [401]), 422, 429) },
      },
    },
    async (request) => (audience === 'main' ? confirmOtp(ctx, request.body) : confirmMockOtp(ctx, request.body)),
  );

  // The mock listener serves endpoints 1-2 only (CONTRACT §3); its sessions simply expire.
  if (audience !== 'main') return;
  app.delete(
    '/api/v1/authorization',
    {
      onRequest: requireSession(ctx, 'any'),
      schema: {
        tags,
        security: bearerAuth,
        summary: 'Log out: the bearer token stops working at once (Lipa addition)',
        response: { 204: Type.Null(), ...errors(401) },
      },
    },
    async (request, reply) => {
      const { sessionId } = principalOf(request);
      await ctx.store.write((tx) => tx.deleteFrom('sessions').where('id', '=', sessionId).execute());
      return reply.code(204).send(null);
    },
  );
}
