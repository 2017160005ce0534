import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { MAX_SENDS_PER_URL } from '../src/callbacks/redeliver.js';
import { REDELIVERIES_PER_SECOND } from '../src/callbacks/routes.js';
import { deliverDueCallbacks, MAX_ATTEMPTS, MAX_DELAY_MS, stopCallbacks, UNFINISHED } from '../src/callbacks/worker.js';
import { type LipaClient, type Payment, verifyCallback } from '../src/client/index.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { createContext } from '../src/context.js';
import { openDatabase } from '../src/db/database.js';
import { createLogger } from '../src/logger.js';
import { assertError } from './helpers/assertions.js';
import { call, clientFor, createPayer, merchantWithPos, payerToken, paymentBody } from './helpers/client.js';
import { ADMIN_TOKEN, freshDatabase, type Lipa, ON_POSTGRES, STAGING_OTP, startLipa, type TestDatabase } from './helpers/harness.js';
import { breakableDatabase } from './helpers/outage.js';
import { freePort, startLipaProcess } from './helpers/process.js';
import { type Received, type Receiver, startReceiver } from './helpers/receiver.js';

/** Callbacks (CONTRACT §7), end to end: real service, real receivers, real DNS server. */

// biome-ignore lint/suspicious/noExplicitAny: the callbacks API answer is inspected as JSON
type Json = any;

interface Attempt {
  attemptedAt: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}
interface Delivery {
  url: string;
  status: string;
  attempts: number;
  nextAttemptAt: string | null;
  lastError: string | null;
  history: Attempt[];
}
interface CallbackLogEntry {
  eventId: string;
  eventType: string;
  occurredAt: string;
  paymentIdentifier: string;
  body: Json;
  deliveries: Delivery[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it returns something other than undefined; fails with `what` after `timeoutMs`. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(50);
  }
}

/** GET /api/v1/callbacks for one payment, as the merchant. */
async function callbackLog(baseUrl: string, token: string, paymentIdentifier: string): Promise<CallbackLogEntry[]> {
  const reply = await call(baseUrl, 'GET', `/api/v1/callbacks?paymentIdentifier=${encodeURIComponent(paymentIdentifier)}`, { token });
  assert.equal(reply.status, 200, reply.text);
  return reply.body.data as CallbackLogEntry[];
}

/** The single delivery of the payment's single event to `url`, once `ready` holds for it. */
async function waitForDelivery(
  baseUrl: string,
  token: string,
  paymentIdentifier: string,
  url: string,
  ready: (d: Delivery) => boolean,
  timeoutMs = 10_000,
): Promise<{ event: CallbackLogEntry; delivery: Delivery }> {
  return waitFor(
    `the delivery to ${url} of ${paymentIdentifier}`,
    async () => {
      const log = await callbackLog(baseUrl, token, paymentIdentifier);
      const event = log[0];
      const delivery = event?.deliveries.find((d) => d.url === url);
      return event && delivery && ready(delivery) ? { event, delivery } : undefined;
    },
    timeoutMs,
  );
}

/** Creates a payment to the staging payer that accepts after about a second. */
async function pay(client: LipaClient, merchant: { terminalId: string }, callbackUrl: string, phone = '254708000001'): Promise<Payment> {
  const created = await client.createPayment(
    paymentBody(merchant, { payer: { method: 'phone', value: phone }, urls: { callbackUrl } }) as never,
  );
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body as Payment;
}

const onPath = (receiver: { received: Received[] }, path: string) => receiver.received.filter((r) => r.path === path);

/** Sets an event's deliveries as if their tries had gone so, unleased: waiting for them would take hours. */
const asIfTried = (lipa: Lipa, eventId: string, values: { status?: 'failed'; attempts: number; next_attempt_at?: number }) =>
  lipa.ctx.store.write((tx) =>
    tx
      .updateTable('callback_deliveries')
      .set({ ...values, locked_until: 0 })
      .where('event_id', '=', eventId)
      .execute(),
  );

/** Waits until the payment's callback to `${receiver.url}/cb` is settled, and checks it was delivered by one 200, sent once. */
async function deliveredOnce(
  baseUrl: string,
  token: string,
  paymentIdentifier: string,
  receiver: Receiver,
  timeoutMs: number,
): Promise<Delivery> {
  const url = `${receiver.url}/cb`;
  const { delivery } = await waitForDelivery(baseUrl, token, paymentIdentifier, url, (d) => d.status !== 'pending', timeoutMs);
  assert.equal(delivery.status, 'delivered');
  assert.deepEqual(
    delivery.history.map((a) => [a.statusCode, a.error]),
    [[200, null]],
  );
  assert.equal(onPath(receiver, '/cb').length, 1, 'sent once');
  return delivery;
}

/** A plain HTTP server answering every request with 302 to `location`; records what it gets. */
async function startRedirector(location: string): Promise<{ url: string; hits: number; close(): Promise<void> }> {
  const state = { url: '', hits: 0, close: async (): Promise<void> => undefined };
  const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      state.hits++;
      res.writeHead(302, { location }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/**
 * A tiny authoritative DNS server over UDP on 127.0.0.1: answers A queries with `answers[name]`
 * (or `fallbackA`) and every other type (AAAA included) with NOERROR and no records.
 */
async function startDnsServer(
  fallbackA: string,
  answers: Record<string, string> = {},
): Promise<{ port: number; queries: { name: string; type: number }[]; close(): Promise<void> }> {
  const socket = createSocket('udp4');
  const queries: { name: string; type: number }[] = [];
  socket.on('message', (message, peer) => {
    if (message.length < 12) return;
    // Question: labels, then QTYPE and QCLASS.
    let offset = 12;
    const labels: string[] = [];
    while (offset < message.length && message[offset] !== 0) {
      const length = message[offset] ?? 0;
      labels.push(message.subarray(offset + 1, offset + 1 + length).toString('ascii'));
      offset += 1 + length;
    }
    offset += 1;
    if (offset + 4 > message.length) return;
    const type = message.readUInt16BE(offset);
    const question = message.subarray(12, offset + 4);
    const name = labels.join('.').toLowerCase();
    queries.push({ name, type });
    const a = type === 1 ? (answers[name] ?? fallbackA) : null;
    const header = Buffer.alloc(12);
    message.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8400 | (message.readUInt16BE(2) & 0x0100) | 0x0080, 2); // QR, AA, RD copied, RA; NOERROR
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(a ? 1 : 0, 6); // ANCOUNT
    const parts = [header, question];
    if (a) {
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // name: pointer to the question
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6); // TTL
      record.writeUInt16BE(4, 10);
      a.split('.').forEach((octet, i) => {
        record[12 + i] = Number(octet);
      });
      parts.push(record);
    }
    socket.send(Buffer.concat(parts), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    port: socket.address().port,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

describe('callback delivery: retries, back-off, redelivery, body and signature', { concurrency: true }, () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ CALLBACK_RETRY_BASE_SECONDS: '1' });
  });
  after(async () => {
    await lipa.close();
  });

  test('a 200 whose body never ends is an answer: delivered at once, not held 10 s and sent again', async () => {
    const receiver = await startReceiver();
    try {
      receiver.respond = () => ({ status: 200, unfinished: true });
      const merchant = await merchantWithPos(lipa);
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
      const delivery = await deliveredOnce(lipa.url, merchant.token, payment.paymentIdentifier, receiver, 8_000);
      assert.ok((delivery.history[0]?.durationMs ?? 10_000) < 5_000, `durationMs ${delivery.history[0]?.durationMs}`);
      // Nor is the connection held for the body: it is closed about a second after the answer.
      const [hit] = onPath(receiver, '/cb');
      await waitFor('the connection closed', () => (hit?.closedAt !== undefined ? true : undefined), 8_000);
      assert.ok((hit?.closedAt ?? 0) - (hit?.at ?? 0) < 5_000, `closed ${(hit?.closedAt ?? 0) - (hit?.at ?? 0)} ms after the answer`);
    } finally {
      await receiver.close();
    }
  });

  test('500, 500, then 200: three attempts for that URL, one eventId, delivered, back-off between them', async () => {
    const receiver = await startReceiver();
    try {
      let cbCount = 0;
      receiver.respond = (request) => (request.path === '/cb' ? (++cbCount <= 2 ? 500 : 200) : 200);
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);

      const { event, delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/cb`,
        (d) => d.status === 'delivered',
        15_000,
      );
      assert.equal(delivery.attempts, 3);
      assert.deepEqual(
        delivery.history.map((a) => a.statusCode),
        [500, 500, 200],
      );
      assert.deepEqual(
        delivery.history.map((a) => a.error),
        ['HTTP 500', 'HTTP 500', null],
      );
      for (const attempt of delivery.history) {
        assert.ok(Number.isInteger(attempt.durationMs) && attempt.durationMs >= 0, `durationMs: ${attempt.durationMs}`);
      }
      assert.equal(delivery.nextAttemptAt, null, 'nothing more is scheduled once delivered');
      assert.equal(delivery.lastError, null);

      // Attempts are tracked per URL: the resultUrl answered 200 at once.
      const result = event.deliveries.find((d) => d.url === `${receiver.url}/result`);
      assert.equal(result?.status, 'delivered');
      assert.equal(result?.history.length, 1);
      assert.equal(event.deliveries.length, 2);

      const bodies = onPath(receiver, '/cb');
      assert.equal(bodies.length, 3, 'the receiver saw exactly three tries');
      const eventIds = new Set([...bodies, ...onPath(receiver, '/result')].map((r) => JSON.parse(r.body).eventId));
      assert.deepEqual([...eventIds], [event.eventId], 'one eventId across every try and both URLs');
      assert.equal(new Set(bodies.map((r) => r.body)).size, 1, 'the same body every time');

      // Back-off: ~1 s then ~2 s (±10 % jitter, plus up to one 250 ms worker tick and the request).
      const at = delivery.history.map((a) => Date.parse(a.attemptedAt));
      const [gap1, gap2] = [(at[1] ?? 0) - (at[0] ?? 0), (at[2] ?? 0) - (at[1] ?? 0)];
      assert.ok(gap1 >= 900 && gap1 <= 1100 + 600, `first gap ${gap1} ms`);
      assert.ok(gap2 >= 1800 && gap2 <= 2200 + 600, `second gap ${gap2} ms`);
      assert.ok(gap2 > gap1, `second gap ${gap2} ms is longer than the first ${gap1} ms`);
    } finally {
      await receiver.close();
    }
  });

  test('callbackUrl and resultUrl written two ways but the same URL (scheme case, default port): one delivery', async () => {
    const receiver = await startReceiver();
    try {
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/same?a=1` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url.replace('http:', 'HTTP:')}/same?a=1`);
      await receiver.waitFor(1);
      const { event } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url.replace('http:', 'HTTP:')}/same?a=1`,
        (d) => d.status === 'delivered',
      );
      assert.equal(event.deliveries.length, 1, JSON.stringify(event.deliveries.map((d: { url: string }) => d.url)));
      await sleep(500);
      assert.equal(receiver.received.length, 1, 'the receiver got the event once');
    } finally {
      await receiver.close();
    }
  });

  test('a receiver that never answers 2xx: still pending, next attempt in the future, last error kept', async () => {
    const receiver = await startReceiver();
    try {
      receiver.respond = () => 500;
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/never` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/never`);
      const { event, delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/never`,
        (d) => d.history.length >= 3,
        15_000,
      );
      const checkedAt = Date.now();
      assert.equal(event.deliveries.length, 1, 'callbackUrl and resultUrl are the same URL: one delivery');
      assert.equal(delivery.status, 'pending');
      assert.equal(delivery.attempts, 3);
      assert.equal(delivery.history.length, 3);
      assert.equal(delivery.lastError, 'HTTP 500');
      assert.ok(delivery.nextAttemptAt, 'a next attempt is scheduled');
      const next = Date.parse(delivery.nextAttemptAt);
      assert.ok(next > checkedAt, `nextAttemptAt ${delivery.nextAttemptAt} is in the future`);
      // After three failures the delay doubles twice: base · 2² = 4 s, ±10 % (from the third try's start).
      const delay = next - Date.parse(delivery.history[2]?.attemptedAt ?? '');
      assert.ok(delay >= 3600 && delay <= 4400 + 600, `delay after the third failure: ${delay} ms`);
    } finally {
      await receiver.close();
    }
  });

  test('a 302 answer is a failure and the redirect is not followed', async () => {
    const target = await startReceiver();
    const redirector = await startRedirector(`${target.url}/elsewhere`);
    try {
      const merchant = await merchantWithPos(lipa, { resultUrl: `${redirector.url}/cb` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${redirector.url}/cb`);
      const { delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${redirector.url}/cb`,
        (d) => d.history.length >= 2,
        10_000,
      );
      assert.equal(delivery.status, 'pending');
      assert.deepEqual(
        delivery.history.map((a) => [a.statusCode, a.error]),
        [
          [302, 'HTTP 302'],
          [302, 'HTTP 302'],
        ],
      );
      assert.equal(redirector.hits, 2);
      assert.equal(target.received.length, 0, 'the Location was never called');
    } finally {
      await redirector.close();
      await target.close();
    }
  });

  test('the body has the contract shape and the signature verifies against the URL called', async () => {
    const receiver = await startReceiver();
    try {
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
      const created = await clientFor(lipa.url, merchant).createPayment(
        paymentBody(merchant, { orderId: 'order-shape-1', amount: 250.75, urls: { callbackUrl: `${receiver.url}/cb?order=1` } }) as never,
      );
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const payment = created.body as Payment;
      await receiver.waitFor(2);
      const paid = await clientFor(lipa.url, merchant).paymentStatus(payment.paymentIdentifier);
      const final = paid.body as Payment;
      assert.equal(final.status, 'paid');

      for (const request of receiver.received) {
        assert.equal(request.method, 'POST');
        assert.match(String(request.headers['content-type']), /^application\/json/);
        const body = JSON.parse(request.body);
        assert.deepEqual(Object.keys(body).sort(), ['eventId', 'eventType', 'occurredAt', 'payment']);
        assert.match(body.eventId, /^evt_/);
        assert.equal(body.eventType, 'payment.status_changed');
        assert.equal(new Date(body.occurredAt).toISOString(), body.occurredAt, 'occurredAt is ISO 8601');
        assert.deepEqual(body.payment, {
          paymentIdentifier: payment.paymentIdentifier,
          status: 'paid',
          terminalId: merchant.terminalId,
          orderId: 'order-shape-1',
          amount: 250.75,
          refundedAmount: 0,
          currency: 'KES',
          merchantStika: 'KES_100234',
          updatedAt: final.updatedAt,
        });

        const url = `${receiver.url}${request.path}`;
        assert.equal(request.headers['x-service-key-id'], merchant.keyId, 'signed with the key that created the payment');
        assert.ok(verifyCallback({ secret: merchant.secret, url, headers: request.headers, body: request.body }), `verifies for ${url}`);
        assert.ok(
          !verifyCallback({
            secret: merchant.secret,
            url: `https://${new URL(url).host}${request.path}`,
            headers: request.headers,
            body: request.body,
          }),
          'the origin of the URL called is what was signed (scheme included)',
        );
        assert.ok(
          !verifyCallback({ secret: `${merchant.secret}x`, url, headers: request.headers, body: request.body }),
          'another secret does not verify',
        );
      }
      assert.deepEqual(receiver.received.map((r) => r.path).sort(), ['/cb?order=1', '/result']);
    } finally {
      await receiver.close();
    }
  });

  test('the key that created the payment signs its callbacks even once revoked (CONTRACT §7), not a newer key', async () => {
    const receiver = await startReceiver();
    try {
      let tries = 0;
      receiver.respond = (request) => (request.path === '/rotated' && ++tries === 1 ? 500 : 200);
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/rotated` });
      await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/rotated`);
      await waitFor('the first try', () => (onPath(receiver, '/rotated').length >= 1 ? true : undefined));
      // The merchant rotates: a new key, then the old one revoked.
      const newer = await call(lipa.url, 'POST', '/api/v1/api-keys', { token: merchant.token, body: {} });
      assert.equal(newer.status, 201, newer.text);
      assert.equal((await call(lipa.url, 'DELETE', `/api/v1/api-keys/${merchant.keyId}`, { token: merchant.token })).status, 204);
      await waitFor('the retry', () => (onPath(receiver, '/rotated').length >= 2 ? true : undefined), 15_000);
      const url = `${receiver.url}/rotated`;
      for (const request of onPath(receiver, '/rotated')) {
        // X-Service-Key-ID says which key created the payment: one created with a revoked (say
        // leaked) key can be told apart, and is never vouched for by a newer key.
        assert.equal(request.headers['x-service-key-id'], merchant.keyId);
        assert.ok(verifyCallback({ secret: merchant.secret, url, headers: request.headers, body: request.body }));
        assert.ok(!verifyCallback({ secret: newer.body.secret, url, headers: request.headers, body: request.body }));
      }
    } finally {
      await receiver.close();
    }
  });

  test('the tries span about 24 h at the default 30 s base, each wait double the last up to the cap (CONTRACT §1, §7)', () => {
    let waited = 0;
    for (let failed = 1; failed < MAX_ATTEMPTS; failed++) waited += Math.min(30_000 * 2 ** (failed - 1), MAX_DELAY_MS);
    const hours = waited / 3_600_000;
    assert.ok(hours > 23 && hours < 25.5, `the last try comes ${hours.toFixed(1)} h after the first`);
    assert.ok(MAX_ATTEMPTS >= 11 && MAX_ATTEMPTS <= 13, `about 12 tries: ${MAX_ATTEMPTS}`);
  });

  test('redelivering a failed delivery: one more try, failed again if it fails, attempts keeps counting', async () => {
    const receiver = await startReceiver();
    try {
      receiver.respond = () => 503;
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/down` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/down`);
      const { event } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/down`,
        (d) => d.history.length >= 1,
      );
      // As if every try had failed (waiting for them would take over an hour at a 1 s base).
      await asIfTried(lipa, event.eventId, { status: 'failed', attempts: MAX_ATTEMPTS });
      const tries = onPath(receiver, '/down').length;
      const again = await call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`, { token: merchant.token });
      assert.equal(again.status, 202, again.text);
      const { delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/down`,
        (d) => d.status === 'failed' && d.attempts > MAX_ATTEMPTS,
      );
      assert.equal(delivery.attempts, MAX_ATTEMPTS + 1, 'the extra try is counted');
      assert.equal(delivery.nextAttemptAt, null, 'nothing more is scheduled');
      assert.equal(delivery.lastError, 'HTTP 503');
      await sleep(600);
      assert.equal(onPath(receiver, '/down').length, tries + 1, 'exactly one more try');
    } finally {
      await receiver.close();
    }
  });

  test(`an event is sent at most ${MAX_SENDS_PER_URL} times to a URL: past that, a redelivery is 409 redelivery_limit and sends nothing`, async () => {
    const receiver = await startReceiver();
    try {
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/cb` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
      const { event } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/cb`,
        (d) => d.status === 'delivered',
      );
      const redeliver = () => call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`, { token: merchant.token });
      await asIfTried(lipa, event.eventId, { attempts: MAX_SENDS_PER_URL - 1 });
      assert.equal((await redeliver()).status, 202);
      const { delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/cb`,
        (d) => d.status === 'delivered' && d.attempts === MAX_SENDS_PER_URL,
      );
      const sent = receiver.received.length;
      assertError(await redeliver(), 409, 'redelivery_limit');
      await sleep(600);
      assert.equal(receiver.received.length, sent, 'nothing more is sent');
      const after = await waitForDelivery(lipa.url, merchant.token, payment.paymentIdentifier, `${receiver.url}/cb`, () => true);
      assert.deepEqual(after.delivery, delivery, 'the delivery is as it was');
      // A try on the wire counts already: the 100th being sent, a redelivery would be the 101st.
      await lipa.ctx.store.write((tx) =>
        tx
          .updateTable('callback_deliveries')
          .set({ status: 'pending', attempts: MAX_SENDS_PER_URL - 1, locked_until: Date.now() + 5_000 })
          .where('event_id', '=', event.eventId)
          .execute(),
      );
      assertError(await redeliver(), 409, 'redelivery_limit');
    } finally {
      await receiver.close();
    }
  });

  test('the retry schedule as the worker runs it: each wait double the last, capped at 8 h; failed after the last try', async () => {
    // The default 30 s base, where the cap is reached: the 12th wait would be 30 s × 2¹¹ = 17 h.
    const slow = await startLipa();
    const receiver = await startReceiver();
    receiver.respond = () => 500;
    try {
      const merchant = await merchantWithPos(slow, { resultUrl: `${receiver.url}/s` });
      for (const [made, expectedMs] of [
        [9, 30_000 * 2 ** 9],
        [11, MAX_DELAY_MS],
        [MAX_ATTEMPTS - 1, null],
      ] as const) {
        const payment = await pay(clientFor(slow.url, merchant), merchant, `${receiver.url}/s`);
        const { event } = await waitForDelivery(
          slow.url,
          merchant.token,
          payment.paymentIdentifier,
          `${receiver.url}/s`,
          (d) => d.history.length >= 1,
        );
        // As if `made` tries had failed, the next one due now (waiting for them would take hours).
        await asIfTried(slow, event.eventId, { attempts: made, next_attempt_at: Date.now() });
        const { delivery } = await waitForDelivery(
          slow.url,
          merchant.token,
          payment.paymentIdentifier,
          `${receiver.url}/s`,
          (d) => d.attempts === made + 1,
        );
        if (expectedMs === null) {
          assert.equal(delivery.status, 'failed', `after ${made + 1} tries`);
          assert.equal(delivery.nextAttemptAt, null);
          continue;
        }
        assert.equal(delivery.status, 'pending');
        const delay = Date.parse(delivery.nextAttemptAt ?? '') - Date.parse(delivery.history.at(-1)?.attemptedAt ?? '');
        assert.ok(
          delay >= 0.9 * expectedMs && delay <= 1.1 * expectedMs + 1000,
          `after ${made + 1} tries: ${delay} ms, not ~${expectedMs}`,
        );
      }
    } finally {
      await receiver.close();
      await slow.close();
    }
  });

  test(`at most ${REDELIVERIES_PER_SECOND} redeliveries a second per merchant: then 429 with Retry-After, and nothing more is sent`, async () => {
    const receiver = await startReceiver();
    try {
      const merchant = await merchantWithPos(lipa);
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
      const { event } = await waitForDelivery(lipa.url, merchant.token, payment.paymentIdentifier, `${receiver.url}/cb`, (d) =>
        ['delivered'].includes(d.status),
      );
      const asked = await Promise.all(
        Array.from({ length: 3 * REDELIVERIES_PER_SECOND }, () =>
          call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`, { token: merchant.token }),
        ),
      );
      // Sent at once, they are judged within a second or, on a slow machine, two: the limit's
      // windows are a second long and start at their first request.
      const taken = asked.filter((r) => r.status === 202).length;
      assert.ok(taken >= REDELIVERIES_PER_SECOND && taken <= 2 * REDELIVERIES_PER_SECOND, asked.map((r) => r.status).join(','));
      for (const refused of asked.filter((r) => r.status !== 202)) {
        assertError(refused, 429, 'rate_limited');
        assert.match(refused.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
      }
      // Another merchant has a limit of its own.
      const other = await merchantWithPos(lipa);
      assertError(await call(lipa.url, 'POST', '/api/v1/callbacks/evt_nope/redeliver', { token: other.token }), 404, 'not_found');
    } finally {
      await receiver.close();
    }
  });

  test('redeliver sends the same body again; 404 for another merchant, 401 without a token', async () => {
    const receiver = await startReceiver();
    try {
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
      await receiver.waitFor(2);
      const { event } = await waitForDelivery(lipa.url, merchant.token, payment.paymentIdentifier, `${receiver.url}/cb`, (d) =>
        ['delivered'].includes(d.status),
      );
      const first = onPath(receiver, '/cb')[0];
      assert.equal(JSON.parse(first?.body ?? '{}').eventId, event.eventId);

      const other = await merchantWithPos(lipa);
      // Another merchant's event is as unknown as one that does not exist.
      const foreign = await call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`, { token: other.token });
      assertError(foreign, 404, 'not_found');
      assertError(await call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`), 401, 'unauthorized');
      const unknown = await call(lipa.url, 'POST', '/api/v1/callbacks/evt_nope/redeliver', { token: merchant.token });
      assertError(unknown, 404, 'not_found');
      assert.equal(foreign.body.error.message.replace(event.eventId, 'evt_nope'), unknown.body.error.message);
      await sleep(600);
      assert.equal(receiver.received.length, 2, 'refused redeliveries sent nothing');

      const again = await call(lipa.url, 'POST', `/api/v1/callbacks/${event.eventId}/redeliver`, { token: merchant.token });
      assert.equal(again.status, 202, again.text);
      assert.deepEqual(again.body, { eventId: event.eventId, status: 'pending' });
      await receiver.waitFor(4);
      const cb = onPath(receiver, '/cb');
      assert.equal(cb.length, 2);
      assert.equal(cb[1]?.body, cb[0]?.body, 'the same body bytes, same eventId');
      assert.equal(onPath(receiver, '/result').length, 2, 'every URL of the event gets it again');
      assert.ok(
        verifyCallback({ secret: merchant.secret, url: `${receiver.url}/cb`, headers: cb[1]?.headers ?? {}, body: cb[1]?.body ?? '' }),
        'the redelivery is signed',
      );
      assert.notEqual(cb[1]?.headers['x-service-nonce'], cb[0]?.headers['x-service-nonce'], 'a fresh nonce each time');
      const { delivery } = await waitForDelivery(
        lipa.url,
        merchant.token,
        payment.paymentIdentifier,
        `${receiver.url}/cb`,
        (d) => d.history.length === 2 && d.status === 'delivered',
      );
      assert.deepEqual(
        delivery.history.map((a) => a.statusCode),
        [200, 200],
      );
    } finally {
      await receiver.close();
    }
  });
  test('a redelivery asked for while an attempt is on the wire, or while its outcome is being written, is one more send after it', async () => {
    const receiver = await startReceiver();
    try {
      receiver.respond = () => ({ status: 200, afterMs: 1_000 });
      const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/slow` });
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/slow`);
      const sends = () => onPath(receiver, '/slow');
      const redeliver = async () => {
        const eventId = JSON.parse((await receiver.waitFor(1))[0]?.body ?? '{}').eventId as string;
        return call(lipa.url, 'POST', `/api/v1/callbacks/${eventId}/redeliver`, { token: merchant.token });
      };
      const settled = async (count: number) => {
        await waitForDelivery(
          lipa.url,
          merchant.token,
          payment.paymentIdentifier,
          `${receiver.url}/slow`,
          (d) => d.history.length === count && d.status === 'delivered',
        );
        await sleep(1_500);
        assert.equal(sends().length, count, `${count} sends, no more`);
      };

      // On the wire: the attempt's record says "once more", and the worker sends it.
      await receiver.waitFor(1);
      assert.equal((await redeliver()).status, 202);
      await settled(2);

      // On PostgreSQL, asked for between the record's read of the delivery and its write (the
      // row held by another session meanwhile, as a slow database would): the write must not
      // undo it. (SQLite runs one write transaction at a time: no such moment.)
      if (lipa.ctx.store.dialect !== 'postgres') return;
      const holder = new pg.Client({ connectionString: lipa.databaseUrl });
      await holder.connect();
      try {
        assert.equal((await redeliver()).status, 202);
        await receiver.waitFor(3);
        const onTheWire = sends()[2]?.at ?? 0;
        await holder.query('begin');
        const eventId = JSON.parse(sends()[0]?.body ?? '{}').eventId as string;
        await holder.query('select id from callback_deliveries where event_id = $1 for no key update', [eventId]);
        const asked = redeliver();
        // The answer comes at 1 s; its record then waits for the row, as does the redelivery.
        await sleep(Math.max(0, onTheWire + 1_400 - Date.now()));
        await holder.query('commit');
        assert.equal((await asked).status, 202);
        await settled(4);
      } finally {
        await holder.end();
      }
    } finally {
      await receiver.close();
    }
  });
});

// PostgreSQL only: a row lock held by another session (a redelivery, an attempt being
// recorded, a slow database) has no counterpart on SQLite, which runs one writer at a time.
if (ON_POSTGRES) {
  describe('PostgreSQL: a delivery held by another session', () => {
    test('does not hold up the other callbacks that are due: the worker leaves it for a later round', async () => {
      // 5 s (±20 %) to its retry: time to take the row before the worker does, however busy the machine.
      const lipa = await startLipa({ CALLBACK_RETRY_BASE_SECONDS: '5' });
      const receiver = await startReceiver();
      const holder = new pg.Client({ connectionString: lipa.databaseUrl });
      try {
        receiver.respond = (request) => (request.path === '/held' ? 500 : 200);
        const merchant = await merchantWithPos(lipa);
        const client = clientFor(lipa.url, merchant);
        const held = await pay(client, merchant, `${receiver.url}/held`);
        const { delivery } = await waitForDelivery(lipa.url, merchant.token, held.paymentIdentifier, `${receiver.url}/held`, (d) =>
          Boolean(d.attempts === 1 && d.status === 'pending' && d.nextAttemptAt),
        );
        await holder.connect();
        await holder.query('begin');
        await holder.query("select id from callback_deliveries where url like '%/held' for no key update");
        // Its retry is due while the row is held: the worker's claim finds it.
        await sleep(Math.max(0, Date.parse(delivery.nextAttemptAt ?? '') + 200 - Date.now()));
        const free = await pay(client, merchant, `${receiver.url}/cb`);
        await deliveredOnce(lipa.url, merchant.token, free.paymentIdentifier, receiver, 8_000);
        assert.equal(onPath(receiver, '/held').length, 1, 'the held delivery was not sent meanwhile');
        await holder.query('commit');
        await receiver.waitFor(3);
        assert.equal(onPath(receiver, '/held').length, 2, 'and is retried once the row is free');
      } finally {
        await holder.end().catch(() => undefined);
        await receiver.close();
        await lipa.close();
      }
    });
  });
}

// PostgreSQL only: SQLite commits inside the process, with no answer to lose on the way.
if (ON_POSTGRES) {
  describe("PostgreSQL: the answer to an attempt's record lost on the way back", () => {
    test('the record is tried again, finds itself committed, and stops there: one attempt, delivered, sent once, no error', async () => {
      const database = await breakableDatabase();
      const lipa = await startLipa({ DATABASE_URL: database.url });
      const receiver = await startReceiver();
      try {
        const lost = database.loseCommitAnswer(/insert into "callback_attempts"/);
        const merchant = await merchantWithPos(lipa);
        const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
        await lost;
        // The record is tried again within 0.1 s of the loss.
        await sleep(1_000);
        await deliveredOnce(lipa.url, merchant.token, payment.paymentIdentifier, receiver, 5_000);
        assert.ok(lipa.logs.some((line) => /"level":40.*callback attempts are recorded once it is back/.test(line)));
        assert.deepEqual(
          lipa.logs.filter((line) => /"level":50/.test(line)),
          [],
        );
      } finally {
        await receiver.close();
        await lipa.close();
        await database.drop();
      }
    });
  });
}

describe('callbacks over TLS follow the POS trustAllCertificates flag', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  before(async () => {
    lipa = await startLipa({ CALLBACK_RETRY_BASE_SECONDS: '1' });
    receiver = await startReceiver({ https: true });
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('self-signed certificate: delivered when trustAllCertificates is true, never when false', async () => {
    const trusting = await merchantWithPos(lipa, { trustAllCertificates: true, resultUrl: `${receiver.url}/trusting-result` });
    const strict = await merchantWithPos(lipa, { trustAllCertificates: false, resultUrl: `${receiver.url}/strict-result` });
    const trustingPayment = await pay(clientFor(lipa.url, trusting), trusting, `${receiver.url}/trusting-cb`);
    const strictPayment = await pay(clientFor(lipa.url, strict), strict, `${receiver.url}/strict-cb`);

    for (const path of ['/trusting-cb', '/trusting-result']) {
      const { delivery } = await waitForDelivery(
        lipa.url,
        trusting.token,
        trustingPayment.paymentIdentifier,
        `${receiver.url}${path}`,
        (d) => ['delivered'].includes(d.status),
      );
      assert.deepEqual(
        delivery.history.map((a) => a.statusCode),
        [200],
        path,
      );
      const [received] = onPath(receiver, path);
      assert.ok(received, `${path} received the callback`);
      assert.equal(JSON.parse(received.body).payment.paymentIdentifier, trustingPayment.paymentIdentifier);
      assert.ok(verifyCallback({ secret: trusting.secret, url: `${receiver.url}${path}`, headers: received.headers, body: received.body }));
    }

    for (const path of ['/strict-cb', '/strict-result']) {
      const { delivery } = await waitForDelivery(
        lipa.url,
        strict.token,
        strictPayment.paymentIdentifier,
        `${receiver.url}${path}`,
        (d) => d.history.length >= 2,
      );
      assert.equal(delivery.status, 'pending', path);
      for (const attempt of delivery.history) {
        assert.equal(attempt.statusCode, null);
        assert.match(attempt.error ?? '', /certificate/i, `${path}: the attempt records the certificate error`);
      }
    }
    assert.equal(receiver.received.filter((r) => r.path.startsWith('/strict')).length, 0, 'the strict POS never reached the receiver');
  });
});

describe('callback targets with CALLBACK_ALLOW_PRIVATE=false (SSRF)', () => {
  let strictLipa: Lipa;
  let openLipa: Lipa;
  let receiver: Receiver;
  let dns: Awaited<ReturnType<typeof startDnsServer>>;
  let port: string;

  before(async () => {
    dns = await startDnsServer('10.20.30.40', { 'loopback.lipa.test': '127.0.0.1' });
    receiver = await startReceiver();
    port = new URL(receiver.url).port;
    strictLipa = await startLipa({
      CALLBACK_ALLOW_PRIVATE: 'false',
      CALLBACK_RETRY_BASE_SECONDS: '1',
      CALLBACK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
    });
    openLipa = await startLipa({
      CALLBACK_ALLOW_PRIVATE: 'true',
      CALLBACK_RETRY_BASE_SECONDS: '1',
      CALLBACK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
    });
  });
  after(async () => {
    await strictLipa.close();
    await openLipa.close();
    await receiver.close();
    await dns.close();
  });

  test('loopback, IPv4-mapped and IPv4-compatible loopback, 0.0.0.0, metadata and a name resolving to 10.x are never contacted', async () => {
    const merchant = await merchantWithPos(strictLipa, { resultUrl: `http://127.0.0.1:${port}/result` });
    const client = clientFor(strictLipa.url, merchant);
    const targets = [
      { url: `${receiver.url}/loopback`, address: '127.0.0.1' },
      { url: `http://[::ffff:127.0.0.1]:${port}/mapped`, address: '' },
      { url: `http://[::127.0.0.1]:${port}/compatible`, address: '::7f00:1' },
      { url: `http://0.0.0.0:${port}/unspecified`, address: '0.0.0.0' },
      { url: 'http://169.254.169.254/latest/meta-data/', address: '169.254.169.254' },
      { url: `http://internal.lipa.test:${port}/dns`, address: '10.20.30.40' },
    ];
    const payments = await Promise.all(targets.map((t) => pay(client, merchant, t.url)));
    for (const [i, target] of targets.entries()) {
      const { delivery } = await waitForDelivery(
        strictLipa.url,
        merchant.token,
        payments[i]?.paymentIdentifier ?? '',
        target.url,
        (d) => d.history.length >= 2,
      );
      assert.equal(delivery.status, 'pending', target.url);
      for (const attempt of delivery.history) {
        assert.equal(attempt.statusCode, null, target.url);
        assert.match(attempt.error ?? '', /^refused: .*non-public address/, `${target.url}: ${attempt.error}`);
        if (target.address) assert.ok(attempt.error?.includes(target.address), `${target.url}: ${attempt.error}`);
      }
      const { delivery: result } = await waitForDelivery(
        strictLipa.url,
        merchant.token,
        payments[i]?.paymentIdentifier ?? '',
        `http://127.0.0.1:${port}/result`,
        (d) => d.history.length >= 1,
      );
      assert.match(result.lastError ?? '', /^refused: .*non-public address/);
    }
    assert.ok(
      dns.queries.some((q) => q.name === 'internal.lipa.test' && q.type === 1),
      'the name was resolved through CALLBACK_DNS_SERVERS',
    );
    assert.equal(receiver.received.length, 0, `the receiver saw nothing: ${receiver.received.map((r) => r.path).join(', ')}`);
  });

  test('control: with CALLBACK_ALLOW_PRIVATE=true the same receiver is contacted, by address and by name', async () => {
    const merchant = await merchantWithPos(openLipa, { resultUrl: `http://loopback.lipa.test:${port}/by-name` });
    const payment = await pay(clientFor(openLipa.url, merchant), merchant, `${receiver.url}/control`);
    await waitFor('both control callbacks', () =>
      onPath(receiver, '/control').length >= 1 && onPath(receiver, '/by-name').length >= 1 ? true : undefined,
    );
    for (const [path, url] of [
      ['/control', `${receiver.url}/control`],
      ['/by-name', `http://loopback.lipa.test:${port}/by-name`],
    ] as const) {
      const [received] = onPath(receiver, path);
      assert.ok(received);
      assert.equal(JSON.parse(received.body).payment.paymentIdentifier, payment.paymentIdentifier);
      assert.ok(verifyCallback({ secret: merchant.secret, url, headers: received.headers, body: received.body }), url);
    }
    assert.equal(onPath(receiver, '/by-name')[0]?.headers.host, `loopback.lipa.test:${port}`, 'the Host header keeps the name');
  });

  test('CALLBACK_DNS_SERVERS is validated', () => {
    assert.deepEqual(loadConfig({ CALLBACK_DNS_SERVERS: '10.0.0.53, 10.0.0.54:5353,[2001:db8::53]:53' }).callbackDnsServers, [
      '10.0.0.53',
      '10.0.0.54:5353',
      '[2001:db8::53]:53',
    ]);
    assert.deepEqual(loadConfig({}).callbackDnsServers, []);
    for (const bad of ['dns.example', '10.0.0.53:0', '10.0.0.53:99999', '10.0.0.53,', '10.0.0.300', '[10.0.0.53]:53']) {
      assert.throws(() => loadConfig({ CALLBACK_DNS_SERVERS: bad }), ConfigError, bad);
    }
  });
});

describe('callbacks survive a crash of the service process', () => {
  let database: TestDatabase;
  let child: ChildProcess | null = null;
  let receiver: Receiver | null = null;

  before(async () => {
    database = await freshDatabase();
  });
  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await database.drop();
  });

  const startService = (port: number) => startLipaProcess({ DATABASE_URL: database.url, CALLBACK_RETRY_BASE_SECONDS: '1' }, port);

  test('SIGKILL after a failed attempt: after restart the callback arrives with the original eventId', async () => {
    const receiverPort = await freePort(); // nothing listens there yet: the receiver is down
    const callbackUrl = `http://127.0.0.1:${receiverPort}/cb`;
    const servicePort = await freePort();

    const first = await startService(servicePort);
    child = first.child;
    const lipaLike = { url: first.url } as Lipa; // the fixtures only talk HTTP to lipa.url
    const merchant = await merchantWithPos(lipaLike, { resultUrl: callbackUrl });
    const client = clientFor(first.url, merchant);
    const payment = await pay(client, merchant, callbackUrl);
    await waitFor('the payment to be paid', async () => {
      const status = await client.paymentStatus(payment.paymentIdentifier);
      return (status.body as Payment).status === 'paid' ? true : undefined;
    });
    const { event, delivery } = await waitForDelivery(first.url, merchant.token, payment.paymentIdentifier, callbackUrl, (d) =>
      d.history.some((a) => a.error !== null),
    );
    assert.equal(delivery.status, 'pending');
    assert.equal(delivery.history[0]?.statusCode, null, 'the receiver was down');
    const originalEventId = event.eventId;

    first.child.kill('SIGKILL');
    await first.exited;
    assert.equal(first.child.signalCode, 'SIGKILL');

    receiver = await startReceiverOn(receiverPort);
    const second = await startService(servicePort);
    child = second.child;
    const [received] = await receiver.waitFor(1, 15_000);
    assert.ok(received);
    assert.equal(received.path, '/cb');
    const body = JSON.parse(received.body);
    assert.equal(body.eventId, originalEventId, 'the event written before the crash, with its eventId');
    assert.equal(body.payment.paymentIdentifier, payment.paymentIdentifier);
    assert.equal(body.payment.status, 'paid');
    assert.ok(verifyCallback({ secret: merchant.secret, url: callbackUrl, headers: received.headers, body: received.body }));

    const restarted = await waitForDelivery(
      second.url,
      merchant.token,
      payment.paymentIdentifier,
      callbackUrl,
      (d) => d.status === 'delivered',
    );
    assert.equal(restarted.event.eventId, originalEventId);
    assert.equal(restarted.delivery.history.at(-1)?.statusCode, 200);
    assert.ok(restarted.delivery.history.length >= 2, 'the failed attempt before the crash is still recorded');
    second.child.kill('SIGTERM');
    await second.exited;
  });

  test('SIGKILL during an attempt: after restart that attempt is on the record as unfinished, and the callback is sent again', async () => {
    // A receiver that holds its first request open (the service dies while it waits), then answers 200.
    const slow = await startReceiver();
    slow.respond = (_request, index) => (index === 0 ? null : 200);
    const hits = slow.received;
    const callbackUrl = `${slow.url}/slow`;
    try {
      const port = await freePort();
      const first = await startService(port);
      child = first.child;
      const merchant = await merchantWithPos({ url: first.url } as Lipa, { resultUrl: callbackUrl });
      const payment = await pay(clientFor(first.url, merchant), merchant, callbackUrl);
      await waitFor('the callback on the wire', async () => (hits.length === 1 ? true : undefined));
      first.child.kill('SIGKILL');
      await first.exited;

      const second = await startService(port);
      child = second.child;
      // The lease of the attempt that never ended runs out (20 s), then it is tried again.
      const { delivery } = await waitForDelivery(
        second.url,
        merchant.token,
        payment.paymentIdentifier,
        callbackUrl,
        (d) => d.status === 'delivered',
        40_000,
      );
      assert.equal(hits.length, 2, 'sent twice: at least once');
      assert.equal(JSON.parse(hits[1]?.body ?? '{}').eventId, JSON.parse(hits[0]?.body ?? '{}').eventId);
      assert.equal(delivery.attempts, 2);
      assert.deepEqual(
        delivery.history.map((a) => [a.statusCode, a.error]),
        [
          [null, UNFINISHED],
          [200, null],
        ],
      );
      second.child.kill('SIGTERM');
      await second.exited;
    } finally {
      await slow.close();
    }
  });
});

/** A recording receiver like startReceiver(), but on a given port (the callback URL names it). */
async function startReceiverOn(port: number): Promise<Receiver> {
  const received: Received[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    respond: () => 200,
    waitFor: async (count, timeoutMs = 10_000) =>
      waitFor(`${count} requests`, () => (received.length >= count ? received : undefined), timeoutMs),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('the database lost while a callback is on the wire', () => {
  test("the receiver's answer is recorded once the database is back: delivered after one attempt, sent once", async () => {
    const database = await breakableDatabase();
    const lipa = await startLipa({ DATABASE_URL: database.url });
    const receiver = await startReceiver();
    try {
      // The receiver answers 200 a second after the callback arrives; the database goes when
      // it arrives and comes back 2.5 s later.
      let outage: Promise<void> | undefined;
      receiver.respond = () => {
        outage ??= (async () => {
          await database.down(lipa.ctx.store);
          await sleep(2_500);
          await database.up(lipa.ctx.store);
        })();
        return { status: 200, afterMs: 1_000 };
      };
      const merchant = await merchantWithPos(lipa);
      const payment = await pay(clientFor(lipa.url, merchant), merchant, `${receiver.url}/cb`);
      await receiver.waitFor(1);
      await outage;
      // Within seconds, not after the 20 s lease and a second copy.
      const delivery = await deliveredOnce(lipa.url, merchant.token, payment.paymentIdentifier, receiver, 5_000);
      // attemptedAt is when it was sent, not when the database let it be written down.
      const sentAt = onPath(receiver, '/cb')[0]?.at ?? 0;
      const attemptedAt = Date.parse(delivery.history[0]?.attemptedAt ?? '');
      assert.ok(Math.abs(attemptedAt - sentAt) < 500, `attemptedAt ${attemptedAt - sentAt} ms from the request`);
      assert.ok(lipa.logs.some((line) => /"level":40.*callback attempts are recorded once it is back/.test(line)));
    } finally {
      await receiver.close();
      await lipa.close();
      await database.drop();
    }
  });
});

describe('a database outage longer than the lease, the receiver having answered', () => {
  test('the answer is recorded once the database is back, and this process never sends the callback again meanwhile', async () => {
    const database = await breakableDatabase();
    // The service without its background tasks: the test runs the callback worker itself,
    // faster than the service would and with a lease of 0.9 s instead of 20 s.
    const config = loadConfig({ ADMIN_TOKEN, STAGING_OTP, LOG_LEVEL: 'silent', DATABASE_URL: database.url });
    const store = await openDatabase(database.url);
    const ctx = createContext({ config, store, log: createLogger('silent') });
    const app = await buildApp(ctx);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const lipa: Lipa = { url, mockUrl: url, ctx, logs: [], databaseUrl: database.url, close: async () => undefined };
    const receiver = await startReceiver();
    let working = true;
    let worker: Promise<void> = Promise.resolve();
    try {
      // The receiver answers 200 0.3 s after the callback arrives; the database goes when it
      // arrives and comes back 2 s later: the lease runs out during the outage.
      let outage: Promise<void> | undefined;
      receiver.respond = () => {
        outage ??= (async () => {
          await database.down(store);
          await sleep(2_000);
          await database.up(store);
        })();
        return { status: 200, afterMs: 300 };
      };
      const merchant = await merchantWithPos(lipa);
      const payer = await createPayer(lipa, { balance: 100 });
      const payment = await pay(clientFor(url, merchant), merchant, `${receiver.url}/cb`, payer.phone);
      const declined = await call(url, 'POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/decline`, {
        token: await payerToken(lipa, payer),
      });
      assert.equal(declined.status, 200, declined.text);
      worker = (async () => {
        while (working) {
          await deliverDueCallbacks(ctx, 900).catch(() => undefined);
          await sleep(50);
        }
      })();
      await receiver.waitFor(1);
      await outage;
      // Two seconds of claims after the database is back, the lease long gone.
      await sleep(2_000);
      await deliveredOnce(url, merchant.token, payment.paymentIdentifier, receiver, 5_000);
    } finally {
      working = false;
      await worker;
      await stopCallbacks(ctx);
      await receiver.close();
      await app.close();
      await ctx.messenger.close();
      await store.close();
      await database.drop();
    }
  });
});
