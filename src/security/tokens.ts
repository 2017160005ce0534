import { createHash, createHmac, randomBytes, randomFillSync, timingSafeEqual } from 'node:crypto';

/** An opaque bearer-style secret: 32 random bytes, base64url, with a readable prefix. */
export function randomSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/**
 * An unguessable identifier that sorts by creation time: the prefix (`pay_`, `msg_`, …), the
 * time in ms as 12 hex digits, then 16 random bytes (128 bits) as hex. Time-ordered keys go
 * to the end of their index instead of a random page, which keeps the pages a commit has to
 * write few (on SQLite a commit's cost is mostly the pages it writes).
 */
export function randomId(prefix: string): string {
  return `${prefix}${Date.now().toString(16).padStart(12, '0')}${randomHex16()}`;
}

/**
 * 16 bytes from the CSPRNG as hex. Asking the CSPRNG for 16 bytes at a time costs more than
 * the rest of an id, so bytes are drawn 4 KiB at a time (as Node's randomUUID does) and
 * each byte is handed out once.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomHex16(): string {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + 16);
  poolOffset += 16;
  return hex;
}

/**
 * High-entropy secrets (session tokens, messaging keys) are stored as SHA-256: a stolen
 * database gives nothing to replay, and lookup by hash stays an index hit.
 */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export function hmacHex(key: Buffer | string, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex');
}

/** Constant-time comparison of two strings (of possibly different lengths). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}
