import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { isDatabaseUnavailable } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import { AppError, DATABASE_RETRY_AFTER_SECONDS } from '../http/errors.js';
import { AmbiguousJsonError } from '../http/json.js';
import { WindowLimiter } from '../http/rate-limit.js';
import type { App } from '../http/types.js';
import { sha256Hex } from '../security/tokens.js';
import { findMessage, type MessagingKey, sendMessage } from './messages.js';
import { messagingReply, messagingResponseDocs } from './responses.js';
import { isEmailRequest, type Refusal, validateMessage } from './validate.js';

/**
 * The interface has no 413 for messages: a body within this limit gets the per-type 400 for
 * content over its limit (LIMITS), a larger one a plain 400.
 */
export const MESSAGE_BODY_LIMIT = 1024 * 1024;

/** The live messaging key a request's api_key header names, or null (missing, unknown, revoked). */
export async function messagingKeyOf(ctx: AppContext, request: FastifyRequest): Promise<MessagingKey | null> {
  const header = request.headers.api_key;
  const apiKey = Array.isArray(header) ? header[0] : header;
  if (!apiKey) return null;
  const db = ctx.store.db;
  const hash = sha256Hex(apiKey);
  const { rows } = await hotQuery(db, 'messaging.key', [hash], () =>
    db.selectFrom('messaging_keys').select(['id', 'merchant_id', 'revoked_at']).where('key_hash', '=', hash),
  );
  const key = rows[0];
  return key && key.revoked_at === null ? { id: key.id, merchantId: key.merchant_id } : null;
}

/**
 * The messaging API (endpoints 7 and 8) at `{messaging_url}` = `/api`, with the api_key
 * header. Its answers have the interface's own shapes (responses.ts), errors included, so
 * it has its own error handler.
 */
export async function registerMessagingRoutes(app: App, ctx: AppContext): Promise<void> {
  await app.register(async (plugin) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    const perKey = new WindowLimiter(ctx.config.rateLimitKeyPerSec, 1000, ctx.now);

    const keyOf = (request: FastifyRequest) => messagingKeyOf(ctx, request);

    /** 429 in the messaging shape, or null when within the limit. */
    const limited = (reply: FastifyReply, key: MessagingKey): FastifyReply | null => {
      try {
        perKey.hit(`messaging:${key.id}`);
        return null;
      } catch (error) {
        const retryAfter = Number((error as AppError).headers?.['Retry-After'] ?? 1);
        return messagingReply.rateLimited(reply, retryAfter);
      }
    };

    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const code = error instanceof AppError ? error.code : error.code;
      if (code === 'payload_too_large' || code === 'FST_ERR_CTP_BODY_TOO_LARGE')
        return messagingReply.badRequest(reply, `The request body is over ${MESSAGE_BODY_LIMIT / 1024 / 1024} MiB.`);
      // Ambiguous JSON (a name twice, a lone surrogate) that is clearly an email gets the email shape.
      if (error instanceof AmbiguousJsonError && isEmailRequest(error.parsed)) return messagingReply.emailBadRequest(reply, error.message);
      if (error instanceof AppError && error.status < 500) return messagingReply.badRequest(reply, error.message);
      if ((error.statusCode ?? 500) < 500) return messagingReply.badRequest(reply, error.message);
      request.log.error({ err: error }, 'messaging request failed');
      // The interface has no 503: the database being unavailable is its 500, with a hint when to retry.
      if (isDatabaseUnavailable(error)) reply.header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
      return messagingReply.internalError(reply);
    });

    const tags = ['Messaging'];
    const security = [{ apiKey: [] }];

    // The api_key is checked first, in onRequest: a bad key is 401 whatever the body is.
    const keys = new WeakMap<FastifyRequest, MessagingKey>();
    const keyFor = (request: FastifyRequest): MessagingKey => {
      const key = keys.get(request);
      if (!key) throw new Error('route is missing its api_key check');
      return key;
    };
    const sendKey = async (request: FastifyRequest, reply: FastifyReply) => {
      const key = await keyOf(request);
      if (!key) return messagingReply.unauthorized(reply);
      keys.set(request, key);
    };
    const lookupKey = async (request: FastifyRequest, reply: FastifyReply) => {
      if (!request.headers.api_key) return messagingReply.lookupAuthenticationFailed(reply, 'The api_key header is missing.');
      const key = await keyOf(request);
      if (!key) return messagingReply.lookupAuthenticationFailed(reply, 'The api_key is invalid or revoked.');
      keys.set(request, key);
    };

    scope.post(
      '/api/messages',
      {
        onRequest: sendKey,
        bodyLimit: MESSAGE_BODY_LIMIT,
        config: { responseDocs: messagingResponseDocs.send },
        // Documented here; checked by validateMessage so that refusals take the interface's shapes.
        attachValidation: true,
        schema: {
          tags,
          security,
          summary: 'Send one email or one SMS (endpoint 7)',
          body: Type.Object({
            message: Type.Object(
              { type: Type.String({ description: 'email or sms' }), content: Type.String() },
              { additionalProperties: true },
            ),
          }),
        },
      },
      async (request, reply) => {
        const key = keyFor(request);
        const tooMany = limited(reply, key);
        if (tooMany) return tooMany;
        const valid = validateMessage(request.body);
        if ('kind' in valid) return refuse(reply, valid);

        const { stored, outcome } = await sendMessage(ctx, key, valid);
        if (valid.type === 'sms') return messagingReply.smsAccepted(reply, stored.id, outcome.status);
        // The mail server said the address does not exist: the interface's invalid-recipient
        // answer, as for an address that fails the syntax check (the message is kept as failed).
        if (outcome.invalidRecipient) return messagingReply.emailInvalidRecipient(reply, valid.email, stored.id);
        return messagingReply.emailAccepted(reply, stored.id, outcome.status);
      },
    );

    scope.get(
      '/api/messages/:message_id',
      {
        onRequest: lookupKey,
        config: { responseDocs: messagingResponseDocs.lookup },
        schema: {
          tags,
          security,
          summary: 'Read back one sent message (endpoint 8)',
          // No length limit of its own: an id that is too long is just unknown (404).
          params: Type.Object({ message_id: Type.String() }),
        },
      },
      async (request, reply) => {
        const key = keyFor(request);
        const tooMany = limited(reply, key);
        if (tooMany) return tooMany;
        const message = await findMessage(ctx, key, request.params.message_id);
        if (message === 'not_found') return messagingReply.notFound(reply);
        if (message === 'access_denied') return messagingReply.accessDenied(reply);
        return messagingReply.found(reply, message.found);
      },
    );
  });
}

function refuse(reply: FastifyReply, refusal: Refusal): FastifyReply {
  if (refusal.kind === 'invalid_recipient') return messagingReply.emailInvalidRecipient(reply, refusal.address);
  return refusal.type === 'email'
    ? messagingReply.emailBadRequest(reply, refusal.message)
    : messagingReply.badRequest(reply, refusal.message);
}
