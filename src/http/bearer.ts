import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import type { Audience, SubjectType } from '../db/schema.js';
import { safeEqual, sha256Hex } from '../security/tokens.js';
import { AppError } from './errors.js';
import { clientOf, WindowLimiter } from './rate-limit.js';
import type { Principal } from './types.js';

const CHALLENGE = { 'WWW-Authenticate': 'Bearer' };

function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer +([^\s]+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * An onRequest hook (before the body is read) that admits only a live session of the given kind (`any`: merchant or payer)
 * opened on this listener. Sessions from the mock environment are refused by the main
 * listener (CONTRACT §3).
 */
export function requireSession(ctx: AppContext, kind: SubjectType | 'any', audience: Audience = 'main') {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const token = bearerToken(request);
    if (!token) throw new AppError('unauthorized', 'Send a bearer token: Authorization: Bearer <token>.', undefined, CHALLENGE);
    const session = await ctx.store.db
      .selectFrom('sessions')
      .select(['id', 'subject_type', 'subject_id', 'audience', 'expires_at'])
      .where('token_hash', '=', sha256Hex(token))
      .executeTakeFirst();
    if (!session || session.audience !== audience || session.expires_at <= ctx.now()) {
      throw new AppError('unauthorized', 'The token is invalid or has expired; log in again.', undefined, CHALLENGE);
    }
    if (kind !== 'any' && session.subject_type !== kind) {
      throw new AppError('forbidden', `This endpoint is for ${kind}s.`);
    }
    request.principal = { type: session.subject_type, id: session.subject_id, sessionId: session.id };
  };
}

/** How long a client IP's failed operator-token tries are counted. */
const ADMIN_FAILURE_WINDOW_MS = 15 * 60_000;
const adminFailures = new WeakMap<AppContext, WindowLimiter>();

/**
 * An onRequest hook for the operator API: the bearer token must be ADMIN_TOKEN. A client IP
 * that sent a wrong one RATE_LIMIT_LOGIN_FAILURES times in 15 minutes gets 429 until the
 * window ends, even with the right one: the token cannot be guessed online.
 */
export function requireAdmin(ctx: AppContext) {
  let failures = adminFailures.get(ctx);
  if (!failures) {
    failures = new WindowLimiter(ctx.config.rateLimitLoginFailures, ADMIN_FAILURE_WINDOW_MS, ctx.now);
    adminFailures.set(ctx, failures);
  }
  const limiter = failures;
  return async (request: FastifyRequest): Promise<void> => {
    limiter.check(clientOf(request));
    const token = bearerToken(request);
    if (!token || !safeEqual(token, ctx.config.adminToken)) {
      // A request without any credentials guesses nothing; one with a wrong one counts.
      if (request.headers.authorization !== undefined) limiter.hit(clientOf(request));
      throw new AppError('unauthorized', 'The operator API needs Authorization: Bearer <ADMIN_TOKEN>.', undefined, CHALLENGE);
    }
  };
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route is missing its session guard');
  return request.principal;
}
