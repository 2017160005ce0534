import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Payment } from '../src/client/index.js';
import { type SignInput, signingString, signRequest } from '../src/client/signing.js';
import { purgeExpired } from '../src/jobs/housekeeping.js';
import { call, clientFor, type MerchantSetup, merchantWithPos, paymentBody, type Reply, sendBytes, unique } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { type LipaProcess, startLipaProcess } from './helpers/process.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** Signed requests (CONTRACT §5) on endpoints 5 and 6, over HTTP against the real server. */

const CREATE = '/api/public/v1/merchant-payments';
const STATUS = '/api/public/v1/merchant-payments/status';
/** Spelled out here, not taken from src/, so a renamed header fails the suite. */
const HEADERS = ['x-service-key-id', 'x-service-nonce', 'x-service-timestamp', 'x-service-hash', 'x-service-signature'] as const;

interface Key {
  keyId: string;
  secret: string;
}

interface SendOptions {
  path: string;
  /** The exact bytes sent. */
  body: string;
  /** The bytes X-Service-Hash is computed over (default: `body`). */
  signedBody?: string;
  /** Overrides of signRequest's input (url defaults to the server called). */
  sign?: Partial<SignInput>;
  /** Header values replaced after signing. */
  set?: Record<string, string>;
  /** Headers removed after signing. */
  omit?: string[];
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const freshNonce = () => randomBytes(16).toString('hex');
/** The same hex digest with its first digit changed. */
const flip = (hex: string) => `${hex[0] === '0' ? '1' : '0'}${hex.slice(1)}`;

function signedHeaders(base: string, key: Key, options: SendOptions): Record<string, string> {
  const headers: Record<string, string> = {
    ...signRequest({
      keyId: key.keyId,
      secret: key.secret,
      method: 'POST',
      url: `${base}${options.path}`,
      body: options.signedBody ?? options.body,
      ...options.sign,
    }),
  };
  for (const name of options.omit ?? []) delete headers[name];
  return { ...headers, ...options.set };
}

/** One POST with exactly these headers and body bytes. */
function post(base: string, path: string, headers: Record<string, string>, body: string): Promise<Reply> {
  return call(base, 'POST', path, { raw: body, headers: { 'content-type': 'application/json', ...headers } });
}

/** One POST with this Host header (fetch sets Host from the URL). */
function postWithHost(base: string, path: string, host: string, headers: Record<string, string>, body: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const request = httpRequest(`${base}${path}`, { method: 'POST', headers: { ...headers, host } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function send(lipa: Pick<Lipa, 'url'>, key: Key, options: SendOptions): Promise<{ reply: Reply; headers: Record<string, string> }> {
  const headers = signedHeaders(lipa.url, key, options);
  return { reply: await post(lipa.url, options.path, headers, options.body), headers };
}

/** The error body of CONTRACT §9 with this status and code. */
function assertRefused(reply: Reply, code: string, status = 403): void {
  assert.equal(reply.status, status, reply.text);
  assert.equal(reply.body?.error?.code, code, reply.text);
  assert.deepEqual(Object.keys(reply.body).sort(), ['error', 'requestId'], reply.text);
  if (status === 403) assert.deepEqual(Object.keys(reply.body.error).sort(), ['code', 'message'], reply.text);
  assert.equal(typeof reply.body.error.message, 'string');
  assert.ok(reply.body.error.message.length > 0);
  assert.equal(typeof reply.body.requestId, 'string');
  assert.equal(reply.body.requestId, reply.headers.get('x-request-id'));
}

function assertOk(reply: Reply, status = 200): void {
  assert.equal(reply.status, status, reply.text);
}

async function paymentsWithOrderIds(lipa: Lipa, orderIds: string[]): Promise<number> {
  const rows = await lipa.ctx.store.db.selectFrom('payments').select('id').where('order_id', 'in', orderIds).execute();
  return rows.length;
}

async function paymentsOf(lipa: Lipa, merchantId: string): Promise<number> {
  const rows = await lipa.ctx.store.db.selectFrom('payments').select('id').where('merchant_id', '=', merchantId).execute();
  return rows.length;
}

async function newKey(lipa: Lipa, merchant: MerchantSetup): Promise<Key> {
  const reply = await call(lipa.url, 'POST', '/api/v1/api-keys', { token: merchant.token, body: {} });
  assert.equal(reply.status, 201, reply.text);
  return { keyId: reply.body.keyId, secret: reply.body.secret };
}

describe('signed requests: every check of CONTRACT §5, each its own 403', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let key: Key;
  let paymentId: string;

  const createBody = (overrides: Record<string, unknown> = {}) => JSON.stringify(paymentBody(merchant, overrides));
  const statusBody = () => JSON.stringify({ paymentIdentifier: paymentId });
  const bodyFor = (path: string) => (path === CREATE ? createBody() : statusBody());

  before(async () => {
    lipa = await startLipa();
    merchant = await merchantWithPos(lipa);
    key = { keyId: merchant.keyId, secret: merchant.secret };
    const { reply } = await send(lipa, key, { path: CREATE, body: createBody({ payer: { method: 'phone', value: '254799000111' } }) });
    assertOk(reply, 201);
    paymentId = reply.body.paymentIdentifier;
  });
  after(async () => {
    await lipa.close();
  });

  test('a correctly signed request is accepted on both endpoints', async () => {
    const created = await send(lipa, key, { path: CREATE, body: createBody() });
    assertOk(created.reply, 201);
    assert.equal(created.reply.body.status, 'pending');
    const status = await send(lipa, key, {
      path: STATUS,
      body: JSON.stringify({ paymentIdentifier: created.reply.body.paymentIdentifier }),
    });
    assertOk(status.reply);
    assert.equal(status.reply.body.paymentIdentifier, created.reply.body.paymentIdentifier);
  });

  for (const path of [CREATE, STATUS]) {
    for (const name of HEADERS) {
      test(`${path}: without ${name} → 403 signature_missing_header`, async () => {
        const { reply } = await send(lipa, key, { path, body: bodyFor(path), omit: [name] });
        assertRefused(reply, 'signature_missing_header');
      });
    }
  }

  test('digests in upper-case hex are accepted too (some encoders write them so); a digest with a digit changed is not', async () => {
    const body = createBody();
    const headers = signedHeaders(lipa.url, key, { path: CREATE, body });
    const upper = {
      ...headers,
      'x-service-hash': (headers['x-service-hash'] ?? '').toUpperCase(),
      'x-service-signature': (headers['x-service-signature'] ?? '').toUpperCase(),
    };
    assert.notEqual(upper['x-service-signature'], headers['x-service-signature'], 'the digest has letters to change');
    assertOk(await post(lipa.url, CREATE, upper, body), 201);
    const other = createBody();
    const changed = signedHeaders(lipa.url, key, { path: CREATE, body: other });
    changed['x-service-signature'] = flip(changed['x-service-signature'] ?? '').toUpperCase();
    assertRefused(await post(lipa.url, CREATE, changed, other), 'signature_mismatch');
  });

  test('an empty header counts as missing', async () => {
    for (const name of HEADERS) {
      const { reply } = await send(lipa, key, { path: STATUS, body: statusBody(), set: { [name]: '' } });
      assertRefused(reply, 'signature_missing_header');
    }
  });

  for (const path of [CREATE, STATUS]) {
    test(`${path}: an unknown key → 403 unknown_key`, async () => {
      const stranger = { keyId: `key_${randomBytes(16).toString('hex')}`, secret: randomBytes(32).toString('hex') };
      assertRefused((await send(lipa, stranger, { path, body: bodyFor(path) })).reply, 'unknown_key');
      // A real key id with a wrong secret is not an unknown key, but a wrong signature.
      const wrongSecret = { keyId: key.keyId, secret: stranger.secret };
      assertRefused((await send(lipa, wrongSecret, { path, body: bodyFor(path) })).reply, 'body_hash_mismatch');
    });
  }

  test('a revoked key → 403 unknown_key on both endpoints', async () => {
    const second = await newKey(lipa, merchant);
    assertOk((await send(lipa, second, { path: STATUS, body: statusBody() })).reply);
    const revoked = await call(lipa.url, 'DELETE', `/api/v1/api-keys/${second.keyId}`, { token: merchant.token });
    assert.equal(revoked.status, 204, revoked.text);
    assertRefused((await send(lipa, second, { path: STATUS, body: statusBody() })).reply, 'unknown_key');
    assertRefused((await send(lipa, second, { path: CREATE, body: createBody() })).reply, 'unknown_key');
    // The merchant's other key is unaffected.
    assertOk((await send(lipa, key, { path: STATUS, body: statusBody() })).reply);
  });

  for (const path of [CREATE, STATUS]) {
    test(`${path}: a timestamp more than 300 s away, either way → 403 stale_timestamp`, async () => {
      // 305, not 301: the server's second may have moved on since the test read the clock
      // (the exact edges are the next test's).
      for (const offset of [-305, 305, -3600, 3600, -86_400 * 365]) {
        const { reply } = await send(lipa, key, { path, body: bodyFor(path), sign: { timestamp: nowSeconds() + offset } });
        assertRefused(reply, 'stale_timestamp');
      }
    });
  }

  test('a timestamp within 300 s, either way, is accepted', async () => {
    for (const offset of [-295, 295]) {
      const { reply } = await send(lipa, key, { path: STATUS, body: statusBody(), sign: { timestamp: nowSeconds() + offset } });
      assertOk(reply);
    }
  });

  test('the window is whole seconds and the same both ways: ±300 accepted, ±301 refused', async () => {
    // Just after a second starts, so that the server's current second is the test's.
    await sleep(1000 - (Date.now() % 1000) + 20);
    const now = nowSeconds();
    for (const offset of [-300, 300]) {
      assertOk((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { timestamp: now + offset } })).reply);
    }
    for (const offset of [-301, 301]) {
      assertRefused(
        (await send(lipa, key, { path: STATUS, body: statusBody(), sign: { timestamp: now + offset } })).reply,
        'stale_timestamp',
      );
    }
  });

  test('a timestamp that is not whole Unix seconds, as written by String(), → 403 stale_timestamp, even when signed', async () => {
    const now = nowSeconds();
    const values = [
      'soon',
      `${now}.0`,
      `${now}abc`,
      `+${now}`,
      `-${now}`,
      `0x${now.toString(16)}`,
      '1.7e9',
      String(Date.now()),
      `0${now}`,
      `${'0'.repeat(200)}${now}`,
    ];
    for (const value of values) {
      // signRequest stringifies its timestamp; build the signature over the exact header text.
      const headers = signedHeaders(lipa.url, key, { path: STATUS, body: statusBody() });
      const nonce = freshNonce();
      headers['x-service-timestamp'] = value;
      headers['x-service-nonce'] = nonce;
      headers['x-service-signature'] = createHmac('sha256', key.secret)
        .update(`https://${new URL(lipa.url).host}POST${value}${nonce}${key.keyId}`)
        .digest('hex');
      assertRefused(await post(lipa.url, STATUS, headers, statusBody()), 'stale_timestamp');
    }
    // The same construction over a good timestamp is a good signature: the refusals above are
    // the timestamp's, not a signature built wrong.
    const headers = signedHeaders(lipa.url, key, { path: STATUS, body: statusBody() });
    const nonce = freshNonce();
    headers['x-service-timestamp'] = String(now);
    headers['x-service-nonce'] = nonce;
    headers['x-service-signature'] = createHmac('sha256', key.secret)
      .update(`https://${new URL(lipa.url).host}POST${now}${nonce}${key.keyId}`)
      .digest('hex');
    assertOk(await post(lipa.url, STATUS, headers, statusBody()));
  });

  test('a replayed request → 403 nonce_reused, and creates nothing more', async () => {
    const body = createBody();
    const orderId = JSON.parse(body).orderId;
    const first = await send(lipa, key, { path: CREATE, body });
    assertOk(first.reply, 201);
    const replay = await post(lipa.url, CREATE, first.headers, body);
    assertRefused(replay, 'nonce_reused');
    // The same nonce with a new, correct signature over another body is refused too.
    const nonce = first.headers['x-service-nonce'];
    const otherBody = createBody();
    const other = await send(lipa, key, { path: CREATE, body: otherBody, sign: { nonce } });
    assertRefused(other.reply, 'nonce_reused');
    assert.equal(await paymentsWithOrderIds(lipa, [orderId, JSON.parse(otherBody).orderId]), 1);
  });

  test('a replayed status request → 403 nonce_reused', async () => {
    const first = await send(lipa, key, { path: STATUS, body: statusBody() });
    assertOk(first.reply);
    assertRefused(await post(lipa.url, STATUS, first.headers, statusBody()), 'nonce_reused');
    // A nonce is single use across both endpoints.
    const nonce = first.headers['x-service-nonce'];
    assertRefused((await send(lipa, key, { path: CREATE, body: createBody(), sign: { nonce } })).reply, 'nonce_reused');
  });

  test('a nonce is kept as long as its timestamp could be accepted: after the purge of expired nonces, its replay is still refused', async () => {
    // Signed 290 s ago (still accepted for 10 s) and 290 s ahead (for 590 s).
    for (const skew of [-290, 290]) {
      const timestamp = nowSeconds() + skew;
      const first = await send(lipa, key, { path: STATUS, body: statusBody(), sign: { timestamp } });
      assertOk(first.reply);
      // The purge as it would run at the last second the timestamp is accepted.
      await purgeExpired({ ...lipa.ctx, now: () => (timestamp + 299) * 1000 });
      assertRefused(await post(lipa.url, STATUS, first.headers, statusBody()), 'nonce_reused');
    }
  });

  test('a nonce is single use per key: another key may use the same nonce', async () => {
    const nonce = freshNonce();
    assertOk((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { nonce } })).reply);
    const other = await newKey(lipa, merchant);
    assertOk((await send(lipa, other, { path: STATUS, body: statusBody(), sign: { nonce } })).reply);
  });

  test('a nonce used on one instance is refused by another on the same database', async () => {
    // Another process: the two share nothing but the database.
    const second = await startLipaProcess({ DATABASE_URL: lipa.databaseUrl });
    try {
      // The second instance works on its own...
      assertOk((await send(second, key, { path: STATUS, body: statusBody() })).reply);
      // ...but a nonce the first instance accepted is refused there (signed for its host),
      const nonce = freshNonce();
      assertOk((await send(lipa, key, { path: CREATE, body: createBody(), sign: { nonce } })).reply, 201);
      assertRefused((await send(second, key, { path: CREATE, body: createBody(), sign: { nonce } })).reply, 'nonce_reused');
      assertRefused((await send(second, key, { path: STATUS, body: statusBody(), sign: { nonce } })).reply, 'nonce_reused');
      // and the other way round.
      const back = freshNonce();
      assertOk((await send(second, key, { path: STATUS, body: statusBody(), sign: { nonce: back } })).reply);
      assertRefused((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { nonce: back } })).reply, 'nonce_reused');
    } finally {
      assert.deepEqual(await second.stop(), { code: 0, signal: null }, second.output());
    }
    // Stopping the second instance left the shared database alone.
    assertOk((await send(lipa, key, { path: STATUS, body: statusBody() })).reply);
  });

  test('a tampered body sent with the original hash → 403 body_hash_mismatch', async () => {
    const original = createBody();
    const tampered = original.replace('"amount":1500.5', '"amount":1.5');
    assert.notEqual(tampered, original);
    const { reply } = await send(lipa, key, { path: CREATE, body: tampered, signedBody: original });
    assertRefused(reply, 'body_hash_mismatch');
    // Same JSON meaning, other bytes: the hash covers bytes.
    const reformatted = JSON.stringify(JSON.parse(original), null, 2);
    assertRefused((await send(lipa, key, { path: CREATE, body: reformatted, signedBody: original })).reply, 'body_hash_mismatch');
    // On the status endpoint: another payment's identifier under the hash of this one.
    const swapped = JSON.stringify({ paymentIdentifier: `${paymentId}x` });
    assertRefused((await send(lipa, key, { path: STATUS, body: swapped, signedBody: statusBody() })).reply, 'body_hash_mismatch');
    assert.equal(await paymentsWithOrderIds(lipa, [JSON.parse(original).orderId]), 0);
  });

  test('a tampered hash → 403 body_hash_mismatch', async () => {
    for (const path of [CREATE, STATUS]) {
      const body = bodyFor(path);
      const hash = signedHeaders(lipa.url, key, { path, body })['x-service-hash'] ?? '';
      for (const bad of [flip(hash), hash.slice(0, 63), `${hash}0`, 'not-a-digest']) {
        assertRefused((await send(lipa, key, { path, body, set: { 'x-service-hash': bad } })).reply, 'body_hash_mismatch');
      }
      // The hash of the empty body is not the hash of this one.
      assertRefused((await send(lipa, key, { path, body, signedBody: '' })).reply, 'body_hash_mismatch');
    }
  });

  test('a tampered signature → 403 signature_mismatch', async () => {
    for (const path of [CREATE, STATUS]) {
      const body = bodyFor(path);
      const signature = signedHeaders(lipa.url, key, { path, body })['x-service-signature'] ?? '';
      for (const bad of [flip(signature), signature.slice(0, 63), `${signature}0`, 'not-a-digest']) {
        assertRefused((await send(lipa, key, { path, body, set: { 'x-service-signature': bad } })).reply, 'signature_mismatch');
      }
    }
  });

  test('a body over 64 KiB: a failed check is still its 403; a good signature gets 413 and keeps its nonce', async () => {
    const big = JSON.stringify({ paymentIdentifier: 'x'.repeat(70_000) });
    for (const path of [CREATE, STATUS]) {
      assertRefused(await post(lipa.url, path, {}, big), 'signature_missing_header');
      assertRefused((await send(lipa, { ...key, secret: 'f'.repeat(64) }, { path, body: big })).reply, 'signature_mismatch');
      assertRefused((await send(lipa, key, { path, body: big, sign: { timestamp: nowSeconds() - 3600 } })).reply, 'stale_timestamp');
      const { reply, headers } = await send(lipa, key, { path, body: big });
      assertRefused(reply, 'payload_too_large', 413);
      // The body was never read, so the request was not verified: its nonce is still unused.
      const small = bodyFor(path);
      const again = await post(
        lipa.url,
        path,
        { ...headers, 'x-service-hash': signedHeaders(lipa.url, key, { path, body: small })['x-service-hash'] ?? '' },
        small,
      );
      assert.ok(again.status === 200 || again.status === 201, again.text);
    }
  });

  test('a signature for another host or method → 403 signature_mismatch', async () => {
    const { host, port } = new URL(lipa.url);
    for (const path of [CREATE, STATUS]) {
      for (const url of [`https://pay.example.com${path}`, `https://127.0.0.1${path}`, `https://localhost:${port}${path}`]) {
        assertRefused((await send(lipa, key, { path, body: bodyFor(path), sign: { url } })).reply, 'signature_mismatch', 403);
      }
      for (const method of ['PUT', 'GET', 'PATCH']) {
        assertRefused((await send(lipa, key, { path, body: bodyFor(path), sign: { method } })).reply, 'signature_mismatch');
      }
      // A scheme other than http(s) in front of the right host is no match either.
      assertRefused((await send(lipa, key, { path, body: bodyFor(path), sign: { origin: `ftp://${host}` } })).reply, 'signature_mismatch');
    }
  });

  test('the signature covers the timestamp, nonce and key id of the headers', async () => {
    const other = await newKey(lipa, merchant);
    const body = statusBody();
    const signed = signedHeaders(lipa.url, key, { path: STATUS, body, sign: { timestamp: nowSeconds() } });
    const cases: Record<string, string>[] = [
      { 'x-service-timestamp': String(Number(signed['x-service-timestamp']) - 1) },
      { 'x-service-nonce': freshNonce() },
    ];
    for (const change of cases) assertRefused(await post(lipa.url, STATUS, { ...signed, ...change }, body), 'signature_mismatch');
    // Another key id of the same merchant, with the body hashed under that key's secret.
    const otherHash = signedHeaders(lipa.url, other, { path: STATUS, body })['x-service-hash'] ?? '';
    const swapped = { ...signed, 'x-service-key-id': other.keyId, 'x-service-hash': otherHash };
    assertRefused(await post(lipa.url, STATUS, swapped, body), 'signature_mismatch');
  });

  test('a nonce of 11 or 129 characters, or with a control character → 403 invalid_nonce', async () => {
    for (const path of [CREATE, STATUS]) {
      // Of the C0 controls only a tab can travel inside an HTTP header value (fetch and Node's
      // parser refuse the others before they reach the service); a byte above 0x7F arrives as
      // a Latin-1 character: é, or the C1 control U+0085.
      for (const nonce of [
        'a'.repeat(11),
        'b'.repeat(129),
        'abcdef\tghijklmn',
        `${'c'.repeat(64)}\t${'d'.repeat(63)}`,
        'abcdefghijkl\u0085',
      ]) {
        const { reply } = await send(lipa, key, { path, body: bodyFor(path), sign: { nonce } });
        assertRefused(reply, 'invalid_nonce');
      }
    }
  });

  test('a nonce of exactly 12 or 128 characters is accepted', async () => {
    for (const length of [12, 128]) {
      const nonce = randomBytes(64).toString('hex').slice(0, length);
      assert.equal(nonce.length, length);
      assertOk((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { nonce } })).reply);
    }
  });

  test('a nonce beyond ASCII but without control characters is accepted (CONTRACT §5), as a header carries it', async () => {
    // fetch sends é as the one byte E9, read back as é: both ends sign the same characters.
    const nonce = `caf\u00e9-${randomBytes(6).toString('hex')}-\u00fc`;
    assertOk((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { nonce } })).reply);
    assertRefused((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { nonce } })).reply, 'nonce_reused');
  });

  test('malformed JSON: a bad signature → 403 first; a good one → 422 invalid_json', async () => {
    for (const path of [CREATE, STATUS]) {
      const body = '{"terminalId": "T1", "amount": ';
      assertRefused((await send(lipa, key, { path, body, set: { 'x-service-signature': '0'.repeat(64) } })).reply, 'signature_mismatch');
      assertRefused((await send(lipa, key, { path, body, omit: ['x-service-nonce'] })).reply, 'signature_missing_header');
      assertRefused((await send(lipa, key, { path, body, sign: { timestamp: nowSeconds() - 1000 } })).reply, 'stale_timestamp');
      assertRefused((await send(lipa, key, { path, body })).reply, 'invalid_json', 422);
      // No body at all, correctly signed (the hash of the empty string): not JSON either.
      assertRefused((await send(lipa, key, { path, body: '' })).reply, 'invalid_json', 422);
      // Nor is a body said to be compressed.
      const plain = path === CREATE ? createBody() : statusBody();
      assertRefused((await send(lipa, key, { path, body: plain, set: { 'content-encoding': 'gzip' } })).reply, 'invalid_json', 422);
      // Nor one of another type, or of a type no one can read (empty, no subtype): the
      // signature is still checked first.
      for (const type of ['text/plain', '', 'json', 'application/', 'application/json/x']) {
        const set = { 'content-type': type };
        const refused = (await send(lipa, key, { path, body: plain, set: { ...set, 'x-service-signature': '0'.repeat(64) } })).reply;
        assertRefused(refused, 'signature_mismatch');
        assertRefused((await send(lipa, key, { path, body: plain, set })).reply, 'invalid_json', 422);
      }
    }
  });

  test('an invalid body (no amount): a bad signature → 403 first; a good one → 422 naming amount', async () => {
    const { amount: _amount, ...withoutAmount } = paymentBody(merchant);
    const body = JSON.stringify(withoutAmount);
    assertRefused(
      (await send(lipa, key, { path: CREATE, body, set: { 'x-service-signature': '0'.repeat(64) } })).reply,
      'signature_mismatch',
    );
    assertRefused((await send(lipa, key, { path: CREATE, body, signedBody: '{}' })).reply, 'body_hash_mismatch');
    const good = (await send(lipa, key, { path: CREATE, body })).reply;
    assertRefused(good, 'validation_failed', 422);
    assert.ok(
      (good.body.error.details as Array<{ field: string }>).some((d) => d.field === 'amount'),
      good.text,
    );
    // Status without its paymentIdentifier, likewise.
    assertRefused((await send(lipa, key, { path: STATUS, body: '{}', sign: { method: 'PUT' } })).reply, 'signature_mismatch');
    assertRefused((await send(lipa, key, { path: STATUS, body: '{}' })).reply, 'validation_failed', 422);
  });

  test('after a 403 nothing was created', async () => {
    const fresh = await merchantWithPos(lipa);
    const freshKey = { keyId: fresh.keyId, secret: fresh.secret };
    const orderIds: string[] = [];
    const attempt = async (code: string, options: Omit<SendOptions, 'path' | 'body'>, signer: Key = freshKey) => {
      const body = JSON.stringify(paymentBody(fresh));
      orderIds.push(JSON.parse(body).orderId);
      assertRefused((await send(lipa, signer, { path: CREATE, body, ...options })).reply, code);
    };
    await attempt('signature_missing_header', { omit: ['x-service-hash'] });
    await attempt('unknown_key', {}, { keyId: `key_${randomBytes(16).toString('hex')}`, secret: fresh.secret });
    await attempt('stale_timestamp', { sign: { timestamp: nowSeconds() - 301 } });
    await attempt('invalid_nonce', { sign: { nonce: 'short' } });
    await attempt('body_hash_mismatch', { signedBody: '{}' });
    await attempt('signature_mismatch', { sign: { url: 'https://pay.example.com/' } });
    const used = await send(lipa, freshKey, { path: STATUS, body: JSON.stringify({ paymentIdentifier: 'pay_nothing' }) });
    assertRefused(used.reply, 'not_found', 404);
    await attempt('nonce_reused', { sign: { nonce: used.headers['x-service-nonce'] ?? '' } });
    assert.equal(await paymentsWithOrderIds(lipa, orderIds), 0);
    assert.equal(await paymentsOf(lipa, fresh.merchantId), 0);
  });

  test('a request refused before its signature is verified does not use up its nonce', async () => {
    const refusals: { code: string; options: (nonce: string) => Omit<SendOptions, 'path' | 'body'> }[] = [
      { code: 'signature_mismatch', options: (nonce) => ({ sign: { nonce, url: 'https://pay.example.com/' } }) },
      { code: 'body_hash_mismatch', options: (nonce) => ({ sign: { nonce }, signedBody: '{}' }) },
      { code: 'stale_timestamp', options: (nonce) => ({ sign: { nonce, timestamp: nowSeconds() - 600 } }) },
      { code: 'signature_missing_header', options: (nonce) => ({ sign: { nonce }, omit: ['x-service-signature'] }) },
    ];
    for (const refusal of refusals) {
      const nonce = freshNonce();
      const body = createBody();
      const refused = await send(lipa, key, { path: CREATE, body, ...refusal.options(nonce) });
      assertRefused(refused.reply, refusal.code);
      const stored = await lipa.ctx.store.db
        .selectFrom('nonces')
        .select('nonce')
        .where('key_id', '=', key.keyId)
        .where('nonce', '=', nonce)
        .execute();
      assert.deepEqual(stored, [], `${refusal.code} must not record the nonce`);
      assertOk((await send(lipa, key, { path: CREATE, body, sign: { nonce } })).reply, 201);
    }
  });

  test('a correctly signed request uses up its nonce even when it is refused for its body (422, 404)', async () => {
    const { amount: _amount, ...withoutAmount } = paymentBody(merchant);
    const refusals: { status: number; code: string; path: string; body: string }[] = [
      { status: 422, code: 'invalid_json', path: CREATE, body: '{"amount": ' },
      { status: 422, code: 'validation_failed', path: CREATE, body: JSON.stringify(withoutAmount) },
      { status: 422, code: 'validation_failed', path: CREATE, body: createBody({ amount: -1 }) },
      { status: 404, code: 'not_found', path: CREATE, body: createBody({ terminalId: unique('T-none-') }) },
      { status: 422, code: 'validation_failed', path: STATUS, body: '{}' },
      { status: 404, code: 'not_found', path: STATUS, body: JSON.stringify({ paymentIdentifier: `${paymentId}-none` }) },
    ];
    for (const refusal of refusals) {
      const nonce = freshNonce();
      const refused = await send(lipa, key, { path: refusal.path, body: refusal.body, sign: { nonce } });
      assertRefused(refused.reply, refusal.code, refusal.status);
      // The identical request again, and a corrected one under the same nonce: both refused.
      assertRefused(await post(lipa.url, refusal.path, refused.headers, refusal.body), 'nonce_reused');
      const corrected = await send(lipa, key, { path: refusal.path, body: bodyFor(refusal.path), sign: { nonce } });
      assertRefused(corrected.reply, 'nonce_reused');
    }
  });

  test('a request refused for its body (422, 404), sent 10 times at once, is refused so once: the others are replays (403)', async () => {
    for (const [path, body, status, code] of [
      [CREATE, '{"amount": ', 422, 'invalid_json'],
      [CREATE, createBody({ amount: -1 }), 422, 'validation_failed'],
      // An unknown terminal (a status request's 404 records its nonce in its own unit instead).
      [CREATE, createBody({ terminalId: unique('T-none-') }), 404, 'not_found'],
    ] as const) {
      const headers = signedHeaders(lipa.url, key, { path, body });
      const replies = await Promise.all(Array.from({ length: 10 }, () => post(lipa.url, path, headers, body)));
      const answered = replies.filter((r) => r.status !== 403);
      assert.equal(answered.length, 1, `${code}: ${replies.map((r) => r.status).join(',')}`);
      assertRefused(answered[0] as Reply, code, status);
      for (const reply of replies.filter((r) => r.status === 403)) assertRefused(reply, 'nonce_reused');
    }
  });

  test('the same status request sent 10 times at once is answered exactly once', async () => {
    const body = statusBody();
    const headers = signedHeaders(lipa.url, key, { path: STATUS, body });
    const replies = await Promise.all(Array.from({ length: 10 }, () => post(lipa.url, STATUS, headers, body)));
    assert.equal(replies.filter((r) => r.status === 200).length, 1, replies.map((r) => r.status).join(','));
    for (const reply of replies.filter((r) => r.status !== 200)) assertRefused(reply, 'nonce_reused');
  });

  test('the signing string may start with https:// or http:// before the host called', async () => {
    const { host } = new URL(lipa.url);
    assertOk((await send(lipa, key, { path: CREATE, body: createBody(), sign: { origin: `https://${host}` } })).reply, 201);
    assertOk((await send(lipa, key, { path: CREATE, body: createBody(), sign: { origin: `http://${host}` } })).reply, 201);
    assertOk((await send(lipa, key, { path: STATUS, body: statusBody(), sign: { origin: `http://${host}` } })).reply);
    // The host is what the client called, port included.
    assert.equal(host, `127.0.0.1:${new URL(lipa.url).port}`);
  });

  test('the same origin written another way verifies: host in any case, default port written out or left out', async () => {
    const { port } = new URL(lipa.url);
    /** A status request whose Host header says `host`, signed for `origin`. */
    const withHost = (host: string, origin: string) => {
      const body = statusBody();
      const headers = signedHeaders(lipa.url, key, { path: STATUS, body, sign: { origin } });
      return postWithHost(lipa.url, STATUS, host, { 'content-type': 'application/json', ...headers }, body);
    };
    for (const [host, origin] of [
      [`LocalHost:${port}`, `https://localhost:${port}`], // the Host header as typed, the origin as a URL parser writes it
      ['localhost', 'https://localhost:443'], // curl leaves the default port out of Host...
      ['localhost', 'http://localhost:80'],
      ['localhost:443', 'https://localhost'], // ...and Python's urlsplit().netloc keeps it
      ['localhost:80', 'http://localhost'],
      ['[::1]:443', 'https://[::1]'],
    ] as const) {
      const reply = await withHost(host, origin);
      assert.equal(reply.status, 200, `Host ${host}, signed for ${origin}: ${reply.text}`);
    }
    // Another port, or a default port that is not the scheme's, is another origin.
    for (const [host, origin] of [
      ['localhost:8443', 'https://localhost'],
      ['localhost', 'https://localhost:8080'],
      ['localhost', 'https://localhost:80'],
      ['localhost:80', 'https://localhost'],
      ['localhost', 'https://localhost.'],
    ] as const) {
      const reply = await withHost(host, origin);
      assert.equal(reply.status, 403, `Host ${host}, signed for ${origin}: ${reply.text}`);
      assert.equal(JSON.parse(reply.text).error.code, 'signature_mismatch');
    }
  });

  test('a Host that is not a host and a port is 400 malformed_request: never signed, never put in paymentUrl', async () => {
    for (const host of ['evil.example/x', 'evil.example?x', 'evil.example:abc', 'a@evil.example', '"><script>']) {
      const body = createBody();
      const headers = signedHeaders(lipa.url, key, { path: CREATE, body, sign: { origin: `https://${host}` } });
      const reply = await postWithHost(lipa.url, CREATE, host, { 'content-type': 'application/json', ...headers }, body);
      assert.equal(reply.status, 400, `${host}: ${reply.text}`);
      assert.equal(JSON.parse(reply.text).error.code, 'malformed_request');
      assert.equal(await paymentsWithOrderIds(lipa, [JSON.parse(body).orderId]), 0, host);
    }
  });

  test('an HTTP/1.0 request without Host is signed for, and its paymentUrl at, the address it connected to', async () => {
    const { host } = new URL(lipa.url);
    const body = createBody();
    const headers = signedHeaders(lipa.url, key, { path: CREATE, body, sign: { origin: `https://${host}` } });
    const lines = Object.entries({ ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
    const answer = await sendBytes(lipa.url, `POST ${CREATE} HTTP/1.0\r\n${lines.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n${body}`);
    assert.match(answer, /^HTTP\/1\.1 201 Created\r\n/, answer);
    const payment = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Payment;
    assert.equal(payment.paymentUrl, `http://${host}/pay/${payment.paymentIdentifier}`);
  });

  test('a signed request pipelined before a malformed one gets its answer before the 400', async () => {
    const body = createBody();
    const headers = signedHeaders(lipa.url, key, { path: CREATE, body });
    const lines = Object.entries({ ...headers, host: new URL(lipa.url).host, 'content-type': 'application/json' });
    // Content-Length one byte short: the body's last byte starts a request that is not HTTP.
    const head = `POST ${CREATE} HTTP/1.1\r\n${lines.map(([n, v]) => `${n}: ${v}\r\n`).join('')}content-length: ${Buffer.byteLength(body) - 1}\r\n\r\n`;
    const answer = await sendBytes(lipa.url, `${head}${body}\r\n\r\n`);
    const answers = answer.split(/(?=HTTP\/1\.1 \d{3} )/);
    // The short body is not the signed one: its 403 comes first, then the 400.
    assert.deepEqual(
      answers.map((a) => a.slice(0, 12)),
      ['HTTP/1.1 403', 'HTTP/1.1 400'],
      answer,
    );
    const whole = await sendBytes(
      lipa.url,
      `${head.replace(/content-length: \d+/, `content-length: ${Buffer.byteLength(body)}`)}${body}X\r\n\r\n`,
    );
    const [created = '', refused = ''] = whole.split(/(?=HTTP\/1\.1 \d{3} )/);
    assert.match(created, /^HTTP\/1\.1 201 Created\r\n/, whole);
    assert.match(refused, /^HTTP\/1\.1 400 Bad Request\r\n/, whole);
    assert.equal(await paymentsWithOrderIds(lipa, [JSON.parse(body).orderId]), 1);
  });

  test('the signature does not cover the path', async () => {
    const body = statusBody();
    const headers = signedHeaders(lipa.url, key, { path: STATUS, body, sign: { url: `${lipa.url}/some/other/path` } });
    assertOk(await post(lipa.url, STATUS, headers, body));
  });

  test('LipaClient: createPayment and paymentStatus round-trip', async () => {
    const client = clientFor(lipa.url, key);
    const request = paymentBody(merchant, { payer: { method: 'phone', value: '254799000222' } }) as never;
    const created = await client.createPayment(request);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const payment = created.body as Payment;
    assert.equal(payment.status, 'no_user');
    assert.equal(payment.amount, 1500.5);
    assert.equal(payment.terminalId, merchant.terminalId);
    const status = await client.paymentStatus(payment.paymentIdentifier);
    assert.equal(status.status, 200, JSON.stringify(status.body));
    const current = status.body as Payment;
    assert.equal(current.paymentIdentifier, payment.paymentIdentifier);
    assert.equal(current.orderId, payment.orderId);
    assert.equal(current.status, 'no_user');
    // Each call signs with a fresh nonce: the same request again is the same payment, not a 403.
    const again = await client.createPayment(request);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal((again.body as Payment).paymentIdentifier, payment.paymentIdentifier);
    // A client with a wrong secret gets the 403 body.
    const wrong = clientFor(lipa.url, { keyId: key.keyId, secret: 'f'.repeat(64) });
    const refused = await wrong.paymentStatus(payment.paymentIdentifier);
    assert.equal(refused.status, 403);
    assert.equal((refused.body as { error: { code: string } }).error.code, 'body_hash_mismatch');
  });
});

describe('signed requests behind a proxy: PUBLIC_BASE_URL', () => {
  const PUBLIC = 'https://pay.example.com';
  let first: Lipa;
  /** Another process: the two share nothing but the database. */
  let second: LipaProcess;
  let merchant: MerchantSetup;
  let key: Key;

  before(async () => {
    first = await startLipa({ PUBLIC_BASE_URL: PUBLIC });
    second = await startLipaProcess({ PUBLIC_BASE_URL: PUBLIC, DATABASE_URL: first.databaseUrl });
    merchant = await merchantWithPos(first);
    key = { keyId: merchant.keyId, secret: merchant.secret };
  });
  after(async () => {
    await second.stop();
    await first.close();
  });

  test('only a signature over PUBLIC_BASE_URL is accepted', async () => {
    const { host } = new URL(first.url);
    const body = () => JSON.stringify(paymentBody(merchant));
    for (const origin of [
      `https://${host}`,
      `http://${host}`,
      'http://pay.example.com',
      'https://pay.example.com:8443',
      'https://other.example',
    ]) {
      assertRefused((await send(first, key, { path: CREATE, body: body(), sign: { origin } })).reply, 'signature_mismatch');
    }
    const created = await send(first, key, { path: CREATE, body: body(), sign: { url: `${PUBLIC}${CREATE}` } });
    assertOk(created.reply, 201);
    assert.ok(created.reply.body.paymentUrl.startsWith(`${PUBLIC}/`), created.reply.text);
  });

  test('the identical request replayed to another instance → 403 nonce_reused', async () => {
    const body = JSON.stringify(paymentBody(merchant));
    const headers = signedHeaders(first.url, key, { path: CREATE, body, sign: { url: `${PUBLIC}${CREATE}` } });
    const created = await post(first.url, CREATE, headers, body);
    assertOk(created, 201);
    assertRefused(await post(second.url, CREATE, headers, body), 'nonce_reused');

    const status = JSON.stringify({ paymentIdentifier: created.body.paymentIdentifier });
    const statusHeaders = signedHeaders(second.url, key, { path: STATUS, body: status, sign: { url: `${PUBLIC}${STATUS}` } });
    assertOk(await post(second.url, STATUS, statusHeaders, status));
    assertRefused(await post(first.url, STATUS, statusHeaders, status), 'nonce_reused');
    assertRefused(await post(second.url, STATUS, statusHeaders, status), 'nonce_reused');
    assert.equal(await paymentsWithOrderIds(first, [JSON.parse(body).orderId]), 1);
  });

  test('the same request sent 10 times at once to both instances is accepted exactly once', async () => {
    const body = JSON.stringify(paymentBody(merchant));
    const headers = signedHeaders(first.url, key, { path: CREATE, body, sign: { url: `${PUBLIC}${CREATE}` } });
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => post((i % 2 ? second : first).url, CREATE, headers, body)));
    const accepted = replies.filter((r) => r.status === 201);
    assert.equal(accepted.length, 1, replies.map((r) => r.status).join(','));
    for (const reply of replies.filter((r) => r.status !== 201)) assertRefused(reply, 'nonce_reused');
    assert.equal(await paymentsWithOrderIds(first, [JSON.parse(body).orderId]), 1);
  });
});

describe('signed requests: the per-key rate limit', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let key: Key;
  let other: Key;
  let paymentId: string;

  before(async () => {
    lipa = await startLipa({ RATE_LIMIT_KEY_PER_SEC: '3' });
    merchant = await merchantWithPos(lipa);
    key = { keyId: merchant.keyId, secret: merchant.secret };
    other = await newKey(lipa, merchant);
    const created = await send(lipa, other, { path: CREATE, body: JSON.stringify(paymentBody(merchant)) });
    assertOk(created.reply, 201);
    paymentId = created.reply.body.paymentIdentifier;
    await new Promise((r) => setTimeout(r, 1100));
  });
  after(async () => {
    await lipa.close();
  });

  test('the 4th signed request within a second → 429 rate_limited with Retry-After; per key', async () => {
    const body = JSON.stringify({ paymentIdentifier: paymentId });
    // Requests refused for their signature do not count against the key.
    for (let i = 0; i < 5; i++) {
      assertRefused(
        (await send(lipa, key, { path: STATUS, body, set: { 'x-service-signature': '0'.repeat(64) } })).reply,
        'signature_mismatch',
      );
    }
    const started = Date.now();
    for (let i = 0; i < 3; i++) assertOk((await send(lipa, key, { path: STATUS, body })).reply);
    const limited = (await send(lipa, key, { path: STATUS, body })).reply;
    assert.ok(Date.now() - started < 1000, 'the four requests took more than a second; the test proves nothing');
    assertRefused(limited, 'rate_limited', 429);
    const retryAfter = limited.headers.get('retry-after');
    assert.equal(retryAfter, '1', 'Retry-After: whole seconds until the one-second window ends');
    // Creating is limited under the same key too...
    assertRefused((await send(lipa, key, { path: CREATE, body: JSON.stringify(paymentBody(merchant)) })).reply, 'rate_limited', 429);
    // ...while the merchant's other key has its own allowance.
    assertOk((await send(lipa, other, { path: STATUS, body })).reply);
    // After the window the key works again.
    await new Promise((r) => setTimeout(r, 1100));
    assertOk((await send(lipa, key, { path: STATUS, body })).reply);
  });
});

describe('a callback is signed over the origin of the callback URL as called (docs/signing.md)', () => {
  let lipa: Lipa;
  let receiver: Receiver;

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('http://127.0.0.1:<port>, no https substitution', async () => {
    const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
    const client = clientFor(lipa.url, merchant);
    const orderId = unique('order-');
    const created = await client.createPayment(paymentBody(merchant, { orderId, urls: { callbackUrl: `${receiver.url}/cb` } }) as never);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    // One copy goes to the callback URL and one to the POS resultUrl, in either order.
    const callback = (await receiver.waitFor(2, 8000)).find((r) => r.path === '/cb');
    assert.ok(callback, 'a callback reached the callback URL');
    const header = (name: string) => String(callback.headers[name]);
    const hmac = (data: string) => createHmac('sha256', merchant.secret).update(data).digest('hex');
    assert.equal(header('x-service-key-id'), merchant.keyId);
    assert.equal(header('x-service-hash'), hmac(callback.body));
    const tail = `POST${header('x-service-timestamp')}${header('x-service-nonce')}${merchant.keyId}`;
    assert.equal(header('x-service-signature'), hmac(`${receiver.url}${tail}`));
    assert.notEqual(header('x-service-signature'), hmac(`${receiver.url.replace('http://', 'https://')}${tail}`));
    const event = JSON.parse(callback.body);
    assert.equal(event.payment.orderId, orderId);
    assert.equal(typeof event.eventId, 'string');
  });
});

describe('docs/signing.md worked example', () => {
  const doc = readFileSync(new URL('../docs/signing.md', import.meta.url), 'utf8');
  /** Computed independently of src/ with `openssl dgst -sha256 -hmac` (and Python's hmac). */
  const OPENSSL_HASH = 'd7878625130de455575b80d5acafbeff394c19e6df7fd3a560a27cffccb4e5ef';
  const OPENSSL_SIGNATURE = 'ec7e8d954aaa3e9502b68d641d44dd0b2431ac15e24955a65344384994b5ba9a';

  function block(language: string): string {
    const match = doc.match(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\\n\`\`\``));
    assert.ok(match?.[1], `docs/signing.md has a \`\`\`${language} block`);
    return match[1];
  }

  function exampleRequest() {
    const [head = '', body = ''] = block('http').split('\n\n');
    const [requestLine = '', ...headerLines] = head.split('\n');
    const [method = '', path = ''] = requestLine.split(' ');
    const headers: Record<string, string> = {};
    for (const line of headerLines) {
      const at = line.indexOf(': ');
      headers[line.slice(0, at).toLowerCase()] = line.slice(at + 2);
    }
    const secret = doc.match(/\| secret \| `([^`]+)` \|/)?.[1];
    assert.ok(secret, 'the inputs table gives the secret');
    return { method, path, headers, body, secret };
  }

  test('signRequest reproduces the header values written in the doc', () => {
    const { method, path, headers, body, secret } = exampleRequest();
    assert.equal(method, 'POST');
    assert.equal(headers.host, 'pay.example.com');
    const signed = signRequest({
      keyId: headers['x-service-key-id'] ?? '',
      secret,
      method,
      url: `https://${headers.host}${path}`,
      body,
      timestamp: Number(headers['x-service-timestamp']),
      nonce: headers['x-service-nonce'] ?? '',
    });
    assert.deepEqual(signed, Object.fromEntries(HEADERS.map((name) => [name, headers[name]])));
    assert.equal(headers['x-service-hash'], OPENSSL_HASH);
    assert.equal(headers['x-service-signature'], OPENSSL_SIGNATURE);
  });

  test('the doc shows the fixed inputs, the exact body and the signing string', () => {
    const { headers, body, secret } = exampleRequest();
    assert.equal(headers['x-service-key-id'], 'key_4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e');
    assert.equal(secret, '9f2b7c4e1a8d3f6b0c5e2a7d4f1b8c3e6a9d2f5b8e1c4a7d0f3b6e9c2a5d8f1b');
    assert.equal(headers['x-service-timestamp'], '1767225600');
    assert.equal(headers['x-service-nonce'], '5f0c1e9a2b7d4c3e8f6a1b0d');
    assert.equal(block('json'), body);
    assert.equal(Buffer.byteLength(body), 218);
    const expected = signingString(
      'https://pay.example.com',
      'POST',
      '1767225600',
      '5f0c1e9a2b7d4c3e8f6a1b0d',
      headers['x-service-key-id'] ?? '',
    );
    assert.equal(expected, 'https://pay.example.comPOST17672256005f0c1e9a2b7d4c3e8f6a1b0dkey_4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e');
    assert.ok(doc.includes(`\`\`\`\n${expected}\n\`\`\``), 'the signing string is shown on its own');
  });

  test('the shell snippet of the doc prints the same values', () => {
    const output = execFileSync('sh', ['-c', block('sh')], { encoding: 'utf8' });
    assert.ok(output.includes(`X-Service-Hash: ${OPENSSL_HASH}\n`), output);
    assert.ok(output.includes(`X-Service-Signature: ${OPENSSL_SIGNATURE}\n`), output);
  });
});
