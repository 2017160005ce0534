import type { FastifyRequest } from 'fastify';
import { bodyHash, digestEquals, hmacHex, SIGNATURE_HEADERS, signingString } from '../client/signing.js';
import type { AppContext } from '../context.js';
import { AppError, type ErrorCode } from '../http/errors.js';
import { WindowLimiter } from '../http/rate-limit.js';

/** How far a request's timestamp may be from the server clock, either way (CONTRACT §5). */
export const TIMESTAMP_WINDOW_SECONDS = 300;

export interface Signer {
  keyId: string;
  merchantId: string;
  secret: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified signing key of a signed request. */
    signer: Signer | null;
  }
}

const refuse = (code: ErrorCode, message: string) => new AppError(code, message);

/**
 * The preValidation hook of endpoints 5 and 6: every check of CONTRACT §5, each failure a
 * 403 with its own code, before the body is validated. The nonce is recorded (single use,
 * in the database, so every instance sees it) only once everything else has passed, so that
 * nobody without the secret can burn a merchant's nonces.
 */
export function verifySignedRequest(ctx: AppContext) {
  const perKey = new WindowLimiter(ctx.config.rateLimitKeyPerSec, 1000, ctx.now);

  return async (request: FastifyRequest): Promise<void> => {
    const header = (name: string): string => {
      const value = request.headers[name];
      const text = Array.isArray(value) ? value[0] : value;
      if (text === undefined || text === '') throw refuse('signature_missing_header', `The ${name} header is missing.`);
      return text;
    };
    const keyId = header(SIGNATURE_HEADERS.keyId);
    const nonce = header(SIGNATURE_HEADERS.nonce);
    const timestamp = header(SIGNATURE_HEADERS.timestamp);
    const hash = header(SIGNATURE_HEADERS.hash);
    const signature = header(SIGNATURE_HEADERS.signature);

    const key = await ctx.store.db
      .selectFrom('api_keys')
      .select(['merchant_id', 'secret_enc', 'revoked_at'])
      .where('id', '=', keyId)
      .executeTakeFirst();
    if (!key || key.revoked_at !== null) throw refuse('unknown_key', 'The key in X-Service-Key-ID is unknown or revoked.');

    const now = ctx.now();
    if (!/^[0-9]{1,12}$/.test(timestamp) || Math.abs(now / 1000 - Number(timestamp)) > TIMESTAMP_WINDOW_SECONDS) {
      throw refuse('stale_timestamp', `X-Service-Timestamp must be Unix seconds within ${TIMESTAMP_WINDOW_SECONDS} s of the server clock.`);
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
    if (nonce.length < 12 || nonce.length > 128 || /[\u0000-\u001f\u007f]/.test(nonce)) {
      throw refuse('invalid_nonce', 'X-Service-Nonce must be 12 to 128 characters with no control characters.');
    }

    const secret = ctx.secretBox.open(key.secret_enc, keyId);
    if (!digestEquals(bodyHash(secret, request.rawBody ?? ''), hash)) {
      throw refuse('body_hash_mismatch', 'X-Service-Hash does not match the body received.');
    }
    const method = request.method.toUpperCase();
    const host = request.headers.host ?? '';
    const origins = ctx.config.publicBaseUrl ? [ctx.config.publicBaseUrl] : [`https://${host}`, `http://${host}`];
    if (!origins.some((origin) => digestEquals(hmacHex(secret, signingString(origin, method, timestamp, nonce, keyId)), signature))) {
      throw refuse('signature_mismatch', 'X-Service-Signature does not match.');
    }

    // Counted only once signed: a stranger who knows a key id cannot exhaust its limit.
    perKey.hit(keyId);

    // Kept until its timestamp can no longer be accepted, plus a minute of clock slack.
    const expiresAt = (Number(timestamp) + TIMESTAMP_WINDOW_SECONDS + 60) * 1000;
    const fresh = await ctx.store.write(async (tx) => {
      const inserted = await tx
        .insertInto('nonces')
        .values({ key_id: keyId, nonce, expires_at: expiresAt })
        .onConflict((oc) => oc.columns(['key_id', 'nonce']).doNothing())
        .executeTakeFirst();
      return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1;
    });
    if (!fresh) throw refuse('nonce_reused', 'This X-Service-Nonce was already used with this key.');

    request.signer = { keyId, merchantId: key.merchant_id, secret };
    if (request.deferredBodyError) throw request.deferredBodyError;
  };
}

export function signerOf(request: FastifyRequest): Signer {
  if (!request.signer) throw new Error('route is missing its signature check');
  return request.signer;
}
