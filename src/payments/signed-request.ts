import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { bodyHash, digestEquals, hmacHex, SIGNATURE_HEADERS, signingString } from '../client/signing.js';
import type { AppContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import { AppError, type ErrorCode, errorBody, errorHandler } from '../http/errors.js';
import { calledHost } from '../http/host.js';
import { WindowLimiter } from '../http/rate-limit.js';

/** How far a request's timestamp may be from the server clock, either way (CONTRACT §5). */
export const TIMESTAMP_WINDOW_SECONDS = 300;

export interface Signer {
  keyId: string;
  merchantId: string;
  secret: string;
  nonce: string;
  /** Until when the nonce must be remembered: its timestamp's window plus clock slack. */
  nonceExpiresAt: number;
  /** Set once the nonce is durably recorded. */
  nonceRecorded: boolean;
}

/** Who asks for a merchant's operation: a signed request (its key and nonce), or the merchant's session (the dashboard). */
export interface Asker {
  merchantId: string;
  signer: Signer | null;
}

/** The asker of a signed request. */
export function signedAsker(request: FastifyRequest): Asker {
  const signer = signerOf(request);
  return { merchantId: signer.merchantId, signer };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified signing key of a signed request. */
    signer: Signer | null;
  }
}

/**
 * Decrypted signing secrets, keyed by their ciphertext: decrypting on every request costs
 * more than the rest of the check. Revocation is still read from the database each time.
 */
class OpenedSecrets {
  private readonly opened = new Map<string, string>();

  constructor(private readonly ctx: AppContext) {}

  open(sealed: string, keyId: string): string {
    let secret = this.opened.get(sealed);
    if (secret === undefined) {
      secret = this.ctx.secretBox.open(sealed, keyId);
      if (this.opened.size >= 10_000) this.opened.clear();
      this.opened.set(sealed, secret);
    }
    return secret;
  }
}

const refuse = (code: ErrorCode, message: string) => new AppError(code, message);

/**
 * The same origins written the other ways a client may have signed them: the host in lower
 * case (host names are case-insensitive, and URL parsers lower-case them while a Host header
 * may not), and the scheme's default port written out or left out (`https://pay.example.com`
 * and `https://pay.example.com:443` are one origin; curl and most libraries leave `:443` out
 * of the Host header, Python's `urlsplit().netloc` keeps it). Only tried when the origins as
 * sent do not match, so a correct request costs no extra HMAC.
 */
export function sameOrigins(origins: string[]): string[] {
  const out = new Set<string>();
  for (const origin of origins) {
    const match = /^(https?):\/\/(\[[^\]]*\]|[^:/]*)(?::([0-9]+))?$/i.exec(origin);
    if (!match) continue;
    const scheme = (match[1] as string).toLowerCase();
    const host = (match[2] as string).toLowerCase();
    const defaultPort = scheme === 'https' ? '443' : '80';
    const port = match[3];
    out.add(`${scheme}://${host}${port === undefined ? '' : `:${port}`}`);
    if (port === undefined) out.add(`${scheme}://${host}:${defaultPort}`);
    else if (port === defaultPort) out.add(`${scheme}://${host}`);
  }
  for (const origin of origins) out.delete(origin);
  return [...out];
}

/**
 * The checks of CONTRACT §5 for endpoints 5 and 6, each failure a 403 with its own code,
 * before the body is validated. Nonces are single use per key, kept in the database so
 * every instance sees them, and only recorded once everything else has passed, so that
 * nobody without the secret can burn a merchant's nonces.
 *
 * `preValidation` is the routes' hook. `errorHandler` answers a body over the limit, which
 * Fastify refuses before any hook: every check but the body hash runs first (a failure is
 * still its 403), and only a request that passes them all gets the 413.
 */
export function signedRequests(ctx: AppContext) {
  const perKey = new WindowLimiter(ctx.config.rateLimitKeyPerSec, 1000, ctx.now);
  const secrets = new OpenedSecrets(ctx);

  /** Every check; with `body` null (not read: too large) all but the body hash. */
  const verify = async (request: FastifyRequest, body: Buffer | string | null): Promise<Signer> => {
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

    // The key, and whether its nonce was seen before, in one query.
    const db = ctx.store.db;
    const { rows } = await hotQuery(db, 'signed-request.key', [nonce, keyId], () =>
      db
        .selectFrom('api_keys as k')
        .select((eb) => [
          'k.merchant_id',
          'k.secret_enc',
          'k.revoked_at',
          eb.selectFrom('nonces as n').select('n.nonce').whereRef('n.key_id', '=', 'k.id').where('n.nonce', '=', nonce).as('seen'),
        ])
        .where('k.id', '=', keyId),
    );
    const key = rows[0];
    if (!key || key.revoked_at !== null) throw refuse('unknown_key', 'The key in X-Service-Key-ID is unknown or revoked.');

    const now = ctx.now();
    // In whole seconds, as the header is: 300 s either way of the server's current second.
    if (!/^[1-9][0-9]{0,11}$/.test(timestamp) || Math.abs(Math.floor(now / 1000) - Number(timestamp)) > TIMESTAMP_WINDOW_SECONDS) {
      throw refuse(
        'stale_timestamp',
        `X-Service-Timestamp must be Unix seconds (decimal digits, no leading zero) within ${TIMESTAMP_WINDOW_SECONDS} s of the server clock.`,
      );
    }
    // CONTRACT §5: 12 to 128 characters, no control characters (C0, DEL, C1). A header's bytes
    // above 0x7F are read here as one Latin-1 character each: é sent as the byte E9 (as fetch
    // sends it) verifies; sent as UTF-8 (C3 A9) it reads as two characters and will not.
    if (nonce.length < 12 || nonce.length > 128 || /\p{Cc}/u.test(nonce)) {
      throw refuse('invalid_nonce', 'X-Service-Nonce must be 12 to 128 characters, none of them a control character.');
    }

    const secret = secrets.open(key.secret_enc, keyId);
    if (body !== null && !digestEquals(bodyHash(secret, body), hash)) {
      throw refuse('body_hash_mismatch', 'X-Service-Hash does not match the body received.');
    }
    const method = request.method.toUpperCase();
    const host = calledHost(request);
    const origins = ctx.config.publicBaseUrl ? [ctx.config.publicBaseUrl] : [`https://${host}`, `http://${host}`];
    const signed = (origin: string) => digestEquals(hmacHex(secret, signingString(origin, method, timestamp, nonce, keyId)), signature);
    if (!origins.some(signed) && !sameOrigins(origins).some(signed)) {
      throw refuse('signature_mismatch', 'X-Service-Signature does not match.');
    }

    // A nonce seen before is refused here; recording it happens in the operation's own
    // transaction (consumeNonce), so a request costs one commit, not two.
    if (key.seen !== null) throw nonceReused();
    return {
      keyId,
      merchantId: key.merchant_id,
      secret,
      nonce,
      nonceExpiresAt: (Number(timestamp) + TIMESTAMP_WINDOW_SECONDS + 60) * 1000,
      nonceRecorded: false,
    };
  };

  return {
    preValidation: async (request: FastifyRequest): Promise<void> => {
      request.signer = await verify(request, request.rawBody ?? '');
      // Counted only once signed (a stranger who knows a key id cannot exhaust its limit), and
      // after the signer is known, so a refused request still uses up its nonce.
      perKey.hit(request.signer.keyId);
      if (request.deferredBodyError) throw request.deferredBodyError;
    },
    errorHandler: async (error: FastifyError, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
      // The body was never read, so its hash cannot be checked and its nonce is not used up.
      if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' && !request.signer) {
        try {
          await verify(request, null);
        } catch (refused) {
          return errorHandler(refused as FastifyError, request, reply);
        }
      }
      return errorHandler(error, request, reply);
    },
  };
}

const nonceReused = () => refuse('nonce_reused', 'This X-Service-Nonce was already used with this key.');

/** Records the request's nonce: false when it was there already (used by a concurrent copy). */
async function insertNonce(tx: Tx, signer: Signer): Promise<boolean> {
  const inserted = await hotQuery(tx, 'signed-request.consume-nonce', [signer.keyId, signer.nonce, signer.nonceExpiresAt], () =>
    tx
      .insertInto('nonces')
      .values({ key_id: signer.keyId, nonce: signer.nonce, expires_at: signer.nonceExpiresAt })
      .onConflict((oc) => oc.columns(['key_id', 'nonce']).doNothing()),
  );
  return Number(inserted.numAffectedRows ?? 0n) === 1;
}

/**
 * Records the request's nonce inside the operation's transaction; of two concurrent uses
 * of one nonce, exactly one gets past this. Call it first in the unit.
 */
export async function consumeNonce(tx: Tx, signer: Signer): Promise<void> {
  if (await insertNonce(tx, signer)) return;
  // Another copy has it: nothing more to record for this one (recordUnusedNonce).
  signer.nonceRecorded = true;
  throw nonceReused();
}

/**
 * An onSend hook of signed routes: when the operation did not record the nonce (the body
 * was invalid, the terminal unknown, …), record it before the answer leaves, so that every
 * request that passed the signature check has used up its nonce by the time anyone can
 * see its outcome. Of concurrent copies of such a request, the one that records the nonce
 * keeps its answer and the others are what they are, replays: `403 nonce_reused`. A failure
 * on our side (5xx) keeps its answer: the nonce found there may be the request's own, from a
 * commit whose outcome was lost (a 503 says to retry; a 403 would say it was a replay).
 */
export function recordUnusedNonce(ctx: AppContext) {
  // A callback hook: on the common path (nonce already recorded) it costs no promise.
  return <T>(request: FastifyRequest, reply: FastifyReply, payload: T, done: (err: null, payload: T | string) => void): void => {
    const signer = request.signer;
    if (!signer || signer.nonceRecorded) {
      done(null, payload);
      return;
    }
    ctx.store
      .write((tx) => insertNonce(tx, signer))
      .then(
        (inserted) => {
          signer.nonceRecorded = true;
          if (inserted || reply.statusCode >= 500) return done(null, payload);
          reply.removeHeader('retry-after');
          reply.code(403).type('application/json; charset=utf-8');
          done(null, JSON.stringify(errorBody(nonceReused(), String(request.id))));
        },
        (err: unknown) => {
          request.log.error({ err }, 'could not record a nonce');
          done(null, payload);
        },
      );
  };
}

const signedOptions = new WeakMap<AppContext, ReturnType<typeof makeSignedOptions>>();

function makeSignedOptions(ctx: AppContext) {
  const { preValidation, errorHandler } = signedRequests(ctx);
  return {
    config: { signed: true },
    onRequest: unreadableTypeAsUnknown,
    preValidation,
    errorHandler,
    onSend: recordUnusedNonce(ctx),
  };
}

/**
 * The route options of every signed endpoint (payments, refunds, balance, transactions): the
 * checks of CONTRACT §5 and one per-key rate limit shared by all of them.
 */
export function signedRoute(ctx: AppContext): ReturnType<typeof makeSignedOptions> {
  let options = signedOptions.get(ctx);
  if (!options) {
    options = makeSignedOptions(ctx);
    signedOptions.set(ctx, options);
  }
  return options;
}

export function signerOf(request: FastifyRequest): Signer {
  if (!request.signer) throw new Error('route is missing its signature check');
  return request.signer;
}

/** A media type Fastify can read: `type/subtype` in token characters, then parameters if any (RFC 9110 §8.3.1). */
const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;|$)/;

/**
 * The signed routes' onRequest hook. Fastify answers a Content-Type it cannot read (empty, no
 * subtype) with 415 before any later hook, but a signed request's signature comes first
 * (CONTRACT §5): such a type is read as one the route does not take, so the body is refused
 * once the signature holds (422 invalid_json).
 */
export function unreadableTypeAsUnknown(request: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const type = request.headers['content-type'];
  if (type !== undefined && !MEDIA_TYPE.test(type)) request.headers['content-type'] = 'application/octet-stream';
  done();
}
