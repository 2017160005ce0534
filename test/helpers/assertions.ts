import assert from 'node:assert/strict';
import type { Reply } from './client.js';

/**
 * The error body of the auth, operator and payment APIs (CONTRACT §9): exactly
 * `{error: {code, message, details?}, requestId}`, the request id echoed in X-Request-Id.
 * With `field`, the details name it (`only`: and nothing else).
 */
export function assertError(reply: Reply, status: number, code: string, field?: string, { only = false } = {}): void {
  assert.equal(reply.status, status, reply.text);
  assert.deepEqual(Object.keys(reply.body).sort(), ['error', 'requestId'], reply.text);
  assert.equal(reply.body.error.code, code, reply.text);
  assert.equal(typeof reply.body.error.message, 'string');
  assert.ok(reply.body.error.message.length > 0);
  assert.equal(typeof reply.body.requestId, 'string');
  assert.equal(reply.body.requestId, reply.headers.get('x-request-id'));
  if (field === undefined) return;
  const details = reply.body.error.details as Array<{ field: string; message: string }>;
  assert.ok(Array.isArray(details) && details.length > 0, `details expected: ${reply.text}`);
  for (const d of details) {
    assert.equal(typeof d.field, 'string');
    assert.equal(typeof d.message, 'string');
  }
  const named = only ? details.every((d) => d.field === field) : details.some((d) => d.field === field);
  assert.ok(named, `details should name ${only ? 'only ' : ''}${field}: ${reply.text}`);
}

/** An ISO 8601 UTC timestamp as the API writes them. */
export function assertIso(value: unknown): void {
  assert.equal(typeof value, 'string');
  assert.equal(new Date(value as string).toISOString(), value);
}
