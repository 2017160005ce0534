import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The request-signing scheme of endpoints 5 and 6 and of callbacks (CONTRACT §5). Both
 * digests are lowercase hex HMAC-SHA256 keyed with the UTF-8 bytes of the key's secret:
 *
 *   X-Service-Hash      = HMAC(secret, exact body bytes)           ('' when there is no body)
 *   X-Service-Signature = HMAC(secret, origin + METHOD + timestamp + nonce + keyId)
 *
 * where origin is `https://{host}` (host and port, if any, as the client called it),
 * timestamp is Unix time in whole seconds, and the nonce is 12-128 characters, never reused.
 * This file has no dependency beyond node:crypto, so merchants can copy it.
 */
export const SIGNATURE_HEADERS = {
  keyId: 'x-service-key-id',
  nonce: 'x-service-nonce',
  timestamp: 'x-service-timestamp',
  hash: 'x-service-hash',
  signature: 'x-service-signature',
} as const;

export type SignatureHeaders = Record<(typeof SIGNATURE_HEADERS)[keyof typeof SIGNATURE_HEADERS], string>;

export function hmacHex(secret: string, data: string | Uint8Array): string {
  return createHmac('sha256', secret).update(data).digest('hex');
}

export function bodyHash(secret: string, body: string | Uint8Array): string {
  return hmacHex(secret, body);
}

export function signingString(origin: string, method: string, timestamp: string, nonce: string, keyId: string): string {
  return `${origin}${method.toUpperCase()}${timestamp}${nonce}${keyId}`;
}

/** `https://{host}` for the URL being called: the origin a signature covers. */
export function signingOrigin(url: string | URL): string {
  return `https://${new URL(url).host}`;
}

export interface SignInput {
  keyId: string;
  secret: string;
  method: string;
  /** The URL being called; only its host enters the signature. */
  url: string | URL;
  body: string | Uint8Array;
  /** Unix seconds; defaults to now. */
  timestamp?: number;
  /** Defaults to 32 random hex characters. */
  nonce?: string;
  /** Overrides the origin (for callbacks, `new URL(url).origin`). */
  origin?: string;
}

export function signRequest(input: SignInput): SignatureHeaders {
  const timestamp = String(input.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = input.nonce ?? randomBytes(16).toString('hex');
  const origin = input.origin ?? signingOrigin(input.url);
  return {
    [SIGNATURE_HEADERS.keyId]: input.keyId,
    [SIGNATURE_HEADERS.nonce]: nonce,
    [SIGNATURE_HEADERS.timestamp]: timestamp,
    [SIGNATURE_HEADERS.hash]: bodyHash(input.secret, input.body),
    [SIGNATURE_HEADERS.signature]: hmacHex(input.secret, signingString(origin, input.method, timestamp, nonce, input.keyId)),
  } as SignatureHeaders;
}

/** Constant-time comparison of two hex digests. */
export function digestEquals(expected: string, given: string): boolean {
  const a = Buffer.from(expected, 'utf8');
  const b = Buffer.from(given.toLowerCase(), 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface VerifyCallbackInput {
  secret: string;
  /** The URL Lipa called (your callback URL); its origin is what was signed. */
  url: string | URL;
  /** Request headers, lower-case names (as Node and most frameworks give them). */
  headers: Record<string, string | string[] | undefined>;
  /** The exact body bytes received. */
  body: string | Uint8Array;
  /** Allowed clock difference in seconds (default 300). */
  toleranceSeconds?: number;
  now?: number;
}

/**
 * Verifies a callback from Lipa: body hash, signature over the callback URL's origin, and
 * the timestamp window. Remember the nonce (X-Service-Nonce) to refuse replays; the
 * eventId in the body is stable across retries, so use it to de-duplicate.
 */
export function verifyCallback(input: VerifyCallbackInput): boolean {
  const header = (name: string) => {
    const value = input.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const keyId = header(SIGNATURE_HEADERS.keyId);
  const nonce = header(SIGNATURE_HEADERS.nonce);
  const timestamp = header(SIGNATURE_HEADERS.timestamp);
  const hash = header(SIGNATURE_HEADERS.hash);
  const signature = header(SIGNATURE_HEADERS.signature);
  if (!keyId || !nonce || !timestamp || !hash || !signature || !/^[1-9][0-9]{0,11}$/.test(timestamp)) return false;
  const now = input.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (input.toleranceSeconds ?? 300)) return false;
  if (!digestEquals(bodyHash(input.secret, input.body), hash)) return false;
  const origin = new URL(input.url).origin;
  return digestEquals(hmacHex(input.secret, signingString(origin, 'POST', timestamp, nonce, keyId)), signature);
}
