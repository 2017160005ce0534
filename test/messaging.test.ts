import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.js';
import type { MessageTable } from '../src/db/schema.js';
import type { SmppTransport } from '../src/messaging/transports/smpp.js';
import { admin, call, createMerchant, createPayer, type MerchantFixture, merchantSession, type Reply } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { type SmppPeer, startSmppPeer } from './helpers/smpp-peer.js';
import { type ReceivedMail, type SmtpPeer, startSmtpPeer } from './helpers/smtp-peer.js';

/**
 * The messaging API (endpoints 7 and 8, CONTRACT §8) over HTTP against the real service:
 * the interface's answer shapes, refusals that store nothing, segment counting, the per-key
 * rate limit, and real delivery over SMTP and SMPP (with queueing while a server is down).
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MESSAGE_ID = /^msg_[0-9a-f]{32,}$/;

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON, valid or not
type Body = Record<string, any>;

const send = (lipa: Lipa, apiKey: string | null, message: Body): Promise<Reply> =>
  call(lipa.url, 'POST', '/api/messages', { body: { message }, headers: apiKey === null ? {} : { api_key: apiKey } });

const lookup = (lipa: Lipa, apiKey: string | null, id: string): Promise<Reply> =>
  call(lipa.url, 'GET', `/api/messages/${encodeURIComponent(id)}`, { headers: apiKey === null ? {} : { api_key: apiKey } });

const email = (overrides: Body = {}): Body => ({
  type: 'email',
  email: 'wanjiru@example.com',
  subject: 'Your receipt',
  content: 'Asante for your payment.',
  ...overrides,
});

const sms = (overrides: Body = {}): Body => ({
  type: 'sms',
  phone: { country_code: '254', number: '712345678' },
  content: 'Your order 42 is ready.',
  ...overrides,
});

const keysOf = (value: unknown): string[] => Object.keys(value as object).sort();

async function countMessages(lipa: Lipa): Promise<number> {
  const row = await lipa.ctx.store.db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function messageRow(lipa: Lipa, id: string): Promise<MessageTable> {
  return lipa.ctx.store.db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

async function messagingKey(lipa: Lipa, token: string): Promise<{ id: string; apiKey: string }> {
  const reply = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token, body: {} });
  assert.equal(reply.status, 201, reply.text);
  return { id: reply.body.id, apiKey: reply.body.apiKey };
}

/** Polls GET /api/messages/{id} until its status is one of `wanted`; returns the last `data`. */
async function waitForStatus(lipa: Lipa, apiKey: string, id: string, wanted: string[], timeoutMs = 5_000): Promise<Body> {
  const deadline = Date.now() + timeoutMs;
  let last: Body | undefined;
  for (;;) {
    const reply = await lookup(lipa, apiKey, id);
    assert.equal(reply.status, 200, reply.text);
    last = reply.body.data as Body;
    if (wanted.includes(last.status)) return last;
    if (Date.now() > deadline) assert.fail(`message ${id} is still ${last.status} after ${timeoutMs} ms (wanted ${wanted.join('/')})`);
    await sleep(50);
  }
}

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * A mail server that is down: a port on 127.0.0.1 whose every connection is closed at once.
 * Held, not merely free, so that no other test's server can take it meanwhile (one that
 * accepted and stayed silent would hold each try for the 30 s greeting timeout). `release`
 * frees it, to start the real server there.
 */
async function downServer(): Promise<{ port: number; release: () => Promise<void> }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return { port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** The email the SMTP peer received for a Lipa message id (the X-Lipa-Message-Id header). */
const mailFor = (peer: SmtpPeer, id: string): ReceivedMail | undefined => peer.received.find((m) => m.headers['x-lipa-message-id'] === id);

/** The 6-digit code of the newest email the SMTP peer received for `to` after `skip` emails. */
async function otpFromPeer(peer: SmtpPeer, to: string, skip: number): Promise<{ code: string; mail: ReceivedMail }> {
  let found: ReceivedMail | undefined;
  await until(`an OTP email to ${to}`, () => {
    found = peer.received.slice(skip).find((m) => m.to.includes(to));
    return found !== undefined;
  });
  const mail = found as ReceivedMail;
  const code = mail.text?.match(/\b([0-9]{6})\b/)?.[1];
  assert.ok(code, `a 6-digit code in the email text: ${mail.text}`);
  return { code, mail };
}

/** Merchant login when OTP emails really leave over SMTP (the stored copy has its digits hidden). */
async function loginOverSmtp(lipa: Lipa, peer: SmtpPeer, merchant: MerchantFixture): Promise<string> {
  const skip = peer.received.length;
  const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
  assert.equal(started.status, 200, started.text);
  const { code } = await otpFromPeer(peer, merchant.login.toLowerCase(), skip);
  const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
  assert.equal(confirmed.status, 200, confirmed.text);
  return confirmed.body.token;
}

describe('messaging API: answers and refusals (embedded outbox)', () => {
  let lipa: Lipa;
  let keyA: string;
  let keyA2: string;
  let keyB: string;
  before(async () => {
    lipa = await startLipa();
    const [a, b] = await Promise.all([merchantSession(lipa), merchantSession(lipa)]);
    keyA = (await messagingKey(lipa, a.token)).apiKey;
    keyA2 = (await messagingKey(lipa, a.token)).apiKey;
    keyB = (await messagingKey(lipa, b.token)).apiKey;
  });
  after(() => lipa.close());

  test('email sent: 200 {status: success, message, id}; the lookup shows the email fields', async () => {
    const reply = await send(lipa, keyA, email());
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
    assert.equal(reply.body.status, 'success');
    assert.equal(typeof reply.body.message, 'string');
    assert.match(reply.body.id, MESSAGE_ID);

    const found = await lookup(lipa, keyA, reply.body.id);
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(keysOf(found.body), ['data']);
    const data = found.body.data;
    assert.deepEqual(keysOf(data), ['content', 'content_type', 'created_at', 'email', 'id', 'status', 'subject', 'type']);
    assert.equal(data.id, reply.body.id);
    assert.equal(data.status, 'delivered');
    assert.equal(data.type, 'email');
    assert.equal(data.content, 'Asante for your payment.');
    assert.equal(data.email, 'wanjiru@example.com');
    assert.equal(data.subject, 'Your receipt');
    assert.equal(data.content_type, 'text');
    assert.ok(!Number.isNaN(Date.parse(data.created_at)));

    const html = await send(lipa, keyA, email({ content: '<h1>Asante!</h1>', content_type: 'html' }));
    assert.equal(html.status, 200, html.text);
    assert.equal((await lookup(lipa, keyA, html.body.id)).body.data.content_type, 'html');
  });

  test('email bad request: 400 {status: error, message}, nothing stored', async () => {
    const before = await countMessages(lipa);
    const { subject: _subject, ...noSubject } = email();
    const { content: _content, ...noContent } = email();
    const cases: Array<[string, Body]> = [
      ['missing subject', noSubject],
      ['missing content', noContent],
      ['content_type pdf', email({ content_type: 'pdf' })],
      ['two recipients', email({ email: 'a@x.com,b@y.com' })],
      ['two recipients with ;', email({ email: 'a@x.com; b@y.com' })],
      ['email plus phone', email({ phone: { country_code: '254', number: '712345678' } })],
      ['missing email', email({ email: undefined })],
      ['subject of two lines', email({ subject: 'one\r\nBcc: victim@example.com' })],
      ['a lone surrogate in the content (not storable as UTF-8)', email({ content: 'Asante \ud800' })],
      ['a lone surrogate in the subject', email({ subject: 'Receipt \udc00' })],
      ['a Unicode line separator in the subject', email({ subject: 'Receipt\u2028Bcc: victim@example.com' })],
      ['a NUL in the content', email({ content: 'Asante\u0000' })],
    ];
    const twice = JSON.stringify({ message: email() }).replace('"subject":', '"subject":"Other","subject":');
    for (const [name, message] of [...cases, ['the subject twice (JSON read two ways)', twice] as const]) {
      const reply =
        typeof message === 'string'
          ? await call(lipa.url, 'POST', '/api/messages', { raw: message, headers: { api_key: keyA } })
          : await send(lipa, keyA, message);
      assert.equal(reply.status, 400, `${name}: ${reply.text}`);
      assert.deepEqual(keysOf(reply.body), ['message', 'status'], name);
      assert.equal(reply.body.status, 'error', name);
      assert.equal(typeof reply.body.message, 'string', name);
      assert.ok(reply.body.message.length > 0, name);
    }
    assert.equal(await countMessages(lipa), before);
  });

  test('email invalid recipient: 500 with a JSON string saying the address is invalid, nothing stored', async () => {
    const before = await countMessages(lipa);
    for (const address of [
      'not-an-email',
      'a@b',
      'a@localhost',
      // Valid in RFC 5321 or 6531, but not sendable as one plain address to any server:
      '"john doe"@example.com',
      '"john..doe"@example.com',
      'üser@example.com',
      // IDNA would send these to another domain than the one shown (U+200B dropped, a full-width letter mapped).
      'user@example.co\u200b.uk',
      'user@\uff45xample.com',
      // Punycode that decodes to nothing valid.
      'user@xn--zz.de',
    ]) {
      const reply = await send(lipa, keyA, email({ email: address }));
      assert.equal(reply.status, 500, `${address}: ${reply.text}`);
      assert.match(reply.headers.get('content-type') ?? '', /^application\/json/);
      const body: unknown = JSON.parse(reply.text);
      assert.equal(typeof body, 'string', `${address}: the body is a JSON string, not ${reply.text}`);
      assert.match(body as string, /recipient email address is invalid/i);
      assert.ok((body as string).includes(address), `${address} named in ${body}`);
    }
    // A huge "address" is not echoed whole.
    const long = await send(lipa, keyA, email({ email: `${'x'.repeat(100_000)}@` }));
    assert.equal(long.status, 500);
    assert.ok(long.text.length < 500, `${long.text.length} characters`);
    assert.equal(await countMessages(lipa), before);
  });

  test('addresses that are sent as they are written are accepted: an IDN domain, upper case, plus addressing', async () => {
    for (const address of ['user@bücher.de', 'User+tag@Example.COM', 'a@xn--bcher-kva.de']) {
      const reply = await send(lipa, keyA, email({ email: address }));
      assert.equal(reply.status, 200, `${address}: ${reply.text}`);
    }
  });

  test('SMS sent: 201 {message, data: {status: delivered, id}}; the lookup masks the number and counts segments', async () => {
    const reply = await send(lipa, keyA, sms());
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(keysOf(reply.body), ['data', 'message']);
    assert.equal(typeof reply.body.message, 'string');
    assert.deepEqual(keysOf(reply.body.data), ['id', 'status']);
    assert.equal(reply.body.data.status, 'delivered');
    assert.match(reply.body.data.id, MESSAGE_ID);

    const found = await lookup(lipa, keyA, reply.body.data.id);
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(keysOf(found.body), ['data']);
    const data = found.body.data;
    assert.deepEqual(keysOf(data), ['content', 'created_at', 'id', 'phone', 'segments', 'status', 'type']);
    assert.equal(data.id, reply.body.data.id);
    assert.equal(data.status, 'delivered');
    assert.equal(data.type, 'sms');
    assert.equal(data.content, 'Your order 42 is ready.');
    assert.equal(data.segments, 1);
    assert.deepEqual(data.phone, { number: '******678', country_code: '254' });
    assert.ok(!found.text.includes('712345678'), 'the full number never shows');
  });

  test('SMS bad request: 400 {status: error, message, error_code: bad_request}, nothing stored', async () => {
    const before = await countMessages(lipa);
    const { phone: _phone, ...noPhone } = sms();
    const { content: _content, ...noContent } = sms();
    const cases: Array<[string, Body]> = [
      ['missing phone', noPhone],
      ['missing content', noContent],
      ['country_code 2545', sms({ phone: { country_code: '2545', number: '712345678' } })],
      ['letters in number', sms({ phone: { country_code: '254', number: '7123abc78' } })],
      ['254 + 123', sms({ phone: { country_code: '254', number: '123' } })],
      ['254 + 12345 (digits, but no Kenyan number)', sms({ phone: { country_code: '254', number: '12345' } })],
      ['a lone surrogate in the content', sms({ content: 'Order \ud83d ready' })],
      ['a NUL in the content', sms({ content: 'Order\u0000 ready' })],
      [
        'phone as a list of two',
        sms({
          phone: [
            { country_code: '254', number: '712345678' },
            { country_code: '254', number: '722345678' },
          ],
        }),
      ],
      ['SMS plus email', sms({ email: 'wanjiru@example.com' })],
      ['content of 11 segments', sms({ content: 'a'.repeat(153 * 10 + 1) })],
    ];
    for (const [name, message] of cases) {
      const reply = await send(lipa, keyA, message);
      assert.equal(reply.status, 400, `${name}: ${reply.text}`);
      assert.deepEqual(keysOf(reply.body), ['error_code', 'message', 'status'], name);
      assert.equal(reply.body.status, 'error', name);
      assert.equal(reply.body.error_code, 'bad_request', name);
      assert.equal(typeof reply.body.message, 'string', name);
    }
    assert.equal(await countMessages(lipa), before);
  });

  test('unknown type, malformed JSON or a body without message: 400 bad_request, nothing stored', async () => {
    const before = await countMessages(lipa);
    const replies: Array<[string, Reply]> = [
      ['type fax', await send(lipa, keyA, { type: 'fax', content: 'hello', number: '254712345678' })],
      ['no type', await send(lipa, keyA, { content: 'hello' })],
      ...(await Promise.all(
        ['{"message":', '{', 'nope', '[1,2'].map(
          async (raw): Promise<[string, Reply]> => [
            `malformed ${raw}`,
            await call(lipa.url, 'POST', '/api/messages', { raw, headers: { api_key: keyA } }),
          ],
        ),
      )),
      ['no message', await call(lipa.url, 'POST', '/api/messages', { body: { type: 'sms' }, headers: { api_key: keyA } })],
      ['message a string', await call(lipa.url, 'POST', '/api/messages', { body: { message: 'hi' }, headers: { api_key: keyA } })],
    ];
    for (const [name, reply] of replies) {
      assert.equal(reply.status, 400, `${name}: ${reply.text}`);
      assert.deepEqual(keysOf(reply.body), ['error_code', 'message', 'status'], name);
      assert.equal(reply.body.status, 'error', name);
      assert.equal(reply.body.error_code, 'bad_request', name);
    }
    assert.equal(await countMessages(lipa), before);
  });

  test('large bodies get the interface 400, never a 413: over the content limit, and over 1 MiB', async () => {
    const before = await countMessages(lipa);
    // 70 KiB of email content: within the body limit, over the 60,000-character content limit.
    const long = await send(lipa, keyA, email({ content: 'x'.repeat(70 * 1024) }));
    assert.equal(long.status, 400, long.text);
    assert.deepEqual(keysOf(long.body), ['message', 'status'], 'the email 400 shape');
    assert.match(long.body.message, /at most 60000 characters/);
    const longSms = await send(lipa, keyA, sms({ content: 'x'.repeat(70 * 1024) }));
    assert.equal(longSms.status, 400, longSms.text);
    assert.equal(longSms.body.error_code, 'bad_request');
    // Over 1 MiB the body is not read, so its type is unknown: the general 400.
    const huge = await send(lipa, keyA, email({ content: 'x'.repeat(1024 * 1024 + 1) }));
    assert.equal(huge.status, 400, huge.text);
    assert.deepEqual(huge.body, { status: 'error', message: huge.body.message, error_code: 'bad_request' });
    assert.match(huge.body.message, /over 1 MiB/);
    assert.equal(await countMessages(lipa), before);
  });

  test('POST with a missing, invalid or revoked api_key: 401 {status: error, message, error_code: unauthorized}, nothing stored', async () => {
    const session = await merchantSession(lipa);
    const revoked = await messagingKey(lipa, session.token);
    assert.equal((await send(lipa, revoked.apiKey, sms())).status, 201, 'the key works before it is revoked');
    const deleted = await call(lipa.url, 'DELETE', `/api/v1/messaging-keys/${revoked.id}`, { token: session.token });
    assert.equal(deleted.status, 204, deleted.text);

    const before = await countMessages(lipa);
    const cases: Array<[string, string | null, Body]> = [
      ['missing', null, sms()],
      ['missing, email', null, email()],
      ['missing, invalid body too', null, { type: 'fax' }],
      ['empty', '', sms()],
      ['invalid', `${keyA}x`, sms()],
      ['invalid, email', 'not-a-key', email()],
      ['revoked', revoked.apiKey, sms()],
      ['revoked, email', revoked.apiKey, email()],
    ];
    for (const [name, apiKey, message] of cases) {
      const reply = await send(lipa, apiKey, message);
      assert.equal(reply.status, 401, `${name}: ${reply.text}`);
      assert.deepEqual(keysOf(reply.body), ['error_code', 'message', 'status'], name);
      assert.equal(reply.body.status, 'error', name);
      assert.equal(reply.body.error_code, 'unauthorized', name);
      assert.equal(typeof reply.body.message, 'string', name);
    }
    assert.equal(await countMessages(lipa), before);
  });

  test('GET with a missing, invalid or revoked api_key: 401 {message: Authentication failed, reason}', async () => {
    const sent = await send(lipa, keyA, sms());
    assert.equal(sent.status, 201, sent.text);
    const id = sent.body.data.id;
    const session = await merchantSession(lipa);
    const revoked = await messagingKey(lipa, session.token);
    const deleted = await call(lipa.url, 'DELETE', `/api/v1/messaging-keys/${revoked.id}`, { token: session.token });
    assert.equal(deleted.status, 204, deleted.text);

    for (const [name, apiKey] of [
      ['missing', null],
      ['invalid', 'not-a-key'],
      ['revoked', revoked.apiKey],
    ] as const) {
      for (const target of [id, 'msg_does_not_exist']) {
        const reply = await lookup(lipa, apiKey, target);
        assert.equal(reply.status, 401, `${name}: ${reply.text}`);
        assert.deepEqual(keysOf(reply.body), ['message', 'reason'], name);
        assert.equal(reply.body.message, 'Authentication failed', name);
        assert.equal(typeof reply.body.reason, 'string', name);
        assert.ok(reply.body.reason.length > 0, name);
        assert.ok(!reply.text.includes('Your order'), 'no content leaks');
      }
    }
  });

  test("GET another merchant's message: 403 {message} saying access is denied; any key of the same merchant reads it", async () => {
    const sent = await send(lipa, keyA, sms({ content: 'For merchant A only' }));
    assert.equal(sent.status, 201, sent.text);
    const id = sent.body.data.id;

    const denied = await lookup(lipa, keyB, id);
    assert.equal(denied.status, 403, denied.text);
    assert.deepEqual(keysOf(denied.body), ['message']);
    assert.match(denied.body.message, /access.*denied/i);
    assert.ok(!denied.text.includes('merchant A only'));

    const sameKey = await lookup(lipa, keyA, id);
    assert.equal(sameKey.status, 200, sameKey.text);
    const otherKey = await lookup(lipa, keyA2, id);
    assert.equal(otherKey.status, 200, otherKey.text);
    assert.deepEqual(otherKey.body, sameKey.body);

    // And the other way round, for email.
    const fromB = await send(lipa, keyB, email());
    assert.equal(fromB.status, 200, fromB.text);
    const deniedEmail = await lookup(lipa, keyA, fromB.body.id);
    assert.equal(deniedEmail.status, 403, deniedEmail.text);
    assert.deepEqual(keysOf(deniedEmail.body), ['message']);
    assert.match(deniedEmail.body.message, /access.*denied/i);
    assert.equal((await lookup(lipa, keyB, fromB.body.id)).status, 200);
  });

  test('GET an unknown id: 404 {message, error_code: not_found}', async () => {
    const sent = await send(lipa, keyA, sms());
    const real: string = sent.body.data.id;
    const lookalike = `${real.slice(0, -1)}${real.endsWith('0') ? '1' : '0'}`;
    // The service's own messages (a login OTP) were sent by no merchant: unknown to this API.
    await merchantSession(lipa);
    const otp = await lipa.ctx.store.db.selectFrom('messages').select('id').where('purpose', '=', 'otp').executeTakeFirstOrThrow();
    const own = await lookup(lipa, keyA, otp.id);
    assert.equal(own.status, 404, own.text);
    assert.equal(own.body.error_code, 'not_found');
    // However long an id is, it is only unknown: 404, and a bad key is still 401 first.
    for (const id of [lookalike, 'msg_00000000000000000000000000000000', 'nothing', 'x'.repeat(90), 'x'.repeat(500), 'x'.repeat(5000)]) {
      const unauthorized = await lookup(lipa, 'not-a-key', id);
      assert.equal(unauthorized.status, 401, `${id.slice(0, 20)}… with a bad key: ${unauthorized.text.slice(0, 200)}`);
      assert.equal(unauthorized.body.message, 'Authentication failed');
      const reply = await lookup(lipa, keyA, id);
      assert.equal(reply.status, 404, `${id}: ${reply.text}`);
      assert.deepEqual(keysOf(reply.body), ['error_code', 'message']);
      assert.equal(reply.body.error_code, 'not_found');
      assert.equal(typeof reply.body.message, 'string');
    }
  });

  test('message ids are unguessable-looking (msg_ and at least 32 hex digits) and unique', async () => {
    const replies = await Promise.all([
      ...Array.from({ length: 5 }, () => send(lipa, keyA, sms())),
      ...Array.from({ length: 5 }, () => send(lipa, keyA, email())),
    ]);
    const ids = replies.map((r) => (r.status === 201 ? r.body.data.id : r.body.id) as string);
    for (const id of ids) assert.match(id, MESSAGE_ID);
    assert.equal(new Set(ids).size, ids.length);
    // At least 32 hex digits differ between ids made in the same millisecond: not a counter.
    const tails = ids.map((id) => id.slice(-32));
    assert.equal(new Set(tails).size, ids.length);
  });

  test('segments: GSM-7 160/153, extension characters count 2, UCS-2 70/67 with emoji as 2 units; up to 10 accepted', async () => {
    const cases: Array<[string, string, number]> = [
      ['1 character', 'a', 1],
      ['160 GSM', 'a'.repeat(160), 1],
      ['161 GSM', 'a'.repeat(161), 2],
      ['306 GSM', 'a'.repeat(306), 2],
      ['307 GSM', 'a'.repeat(307), 3],
      ['GSM accents stay GSM', 'é'.repeat(160), 1],
      ['80 € (extension, 2 septets each)', '€'.repeat(80), 1],
      ['81 €', '€'.repeat(81), 2],
      ['159 GSM + one {', `${'a'.repeat(159)}{`, 2],
      ['70 UCS-2', 'ж'.repeat(70), 1],
      ['71 UCS-2', 'ж'.repeat(71), 2],
      ['134 UCS-2', 'ж'.repeat(134), 2],
      ['135 UCS-2', 'ж'.repeat(135), 3],
      ['35 emoji = 70 units', '😀'.repeat(35), 1],
      ['36 emoji = 72 units', '😀'.repeat(36), 2],
      ['69 letters + emoji = 71 units', `${'a'.repeat(69)}😀`, 2],
      ['159 GSM + one non-GSM letter', `${'a'.repeat(159)}ж`, 3],
      ['1530 GSM = 10 segments', 'a'.repeat(1530), 10],
      ['670 UCS-2 = 10 segments', 'ж'.repeat(670), 10],
    ];
    for (const [name, content, segments] of cases) {
      const reply = await send(lipa, keyA, sms({ content }));
      assert.equal(reply.status, 201, `${name}: ${reply.text}`);
      const id = reply.body.data.id;
      assert.equal((await lookup(lipa, keyA, id)).body.data.segments, segments, name);
      assert.equal((await messageRow(lipa, id)).segments, segments, `${name} (stored)`);
    }
    const before = await countMessages(lipa);
    for (const content of ['ж'.repeat(671), '😀'.repeat(336), 'a'.repeat(1531)]) {
      const reply = await send(lipa, keyA, sms({ content }));
      assert.equal(reply.status, 400, reply.text);
      assert.equal(reply.body.error_code, 'bad_request');
    }
    assert.equal(await countMessages(lipa), before);
  });
});

describe('messaging API: per-key rate limit', () => {
  let lipa: Lipa;
  let key: string;
  let otherKey: string;
  before(async () => {
    lipa = await startLipa({ RATE_LIMIT_KEY_PER_SEC: '3' });
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
    otherKey = (await messagingKey(lipa, session.token)).apiKey;
  });
  after(() => lipa.close());

  test('the 4th request within a second answers 429 with Retry-After in the messaging shape, and stores nothing', async () => {
    const before = await countMessages(lipa);
    const started = Date.now();
    const replies: Reply[] = [];
    for (let i = 0; i < 4; i++) replies.push(await send(lipa, key, sms()));
    // Still in the same second: the GET is counted on the same key; another key of the merchant has its own budget.
    const lookedUp = await lookup(lipa, key, replies[0]?.body.data.id);
    const fromOtherKey = await send(lipa, otherKey, sms());
    assert.ok(Date.now() - started < 1000, 'the requests fit in one second');
    assert.deepEqual(
      replies.map((r) => r.status),
      [201, 201, 201, 429],
    );
    const limited = replies[3] as Reply;
    assert.deepEqual(keysOf(limited.body), ['error_code', 'message', 'status']);
    assert.equal(limited.body.status, 'error');
    assert.equal(limited.body.error_code, 'rate_limited');
    assert.equal(typeof limited.body.message, 'string');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${limited.headers.get('retry-after')}`);
    assert.equal(lookedUp.status, 429, lookedUp.text);
    assert.equal(lookedUp.body.error_code, 'rate_limited');
    assert.ok(lookedUp.headers.get('retry-after'));
    assert.equal(fromOtherKey.status, 201, fromOtherKey.text);
    assert.equal(await countMessages(lipa), before + 4, "the three accepted and the other key's, not the refused one");

    await sleep(retryAfter * 1000);
    assert.equal((await send(lipa, key, sms())).status, 201, 'accepted again after Retry-After');
  });
});

describe('messaging API: unexpected failure', () => {
  let lipa: Lipa;
  let key: string;
  before(async () => {
    lipa = await startLipa();
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
  });
  after(() => lipa.close());

  test('a failure inside the service: 500 {status: error, message, error_code: internal_server_error}, no details', async () => {
    const sent = await send(lipa, key, sms());
    assert.equal(sent.status, 201, sent.text);
    const before = await countMessages(lipa);
    // Break the storage under the running service.
    await sql`alter table messages rename to messages_elsewhere`.execute(lipa.ctx.store.db);
    try {
      for (const message of [sms(), email()]) {
        const reply = await send(lipa, key, message);
        assert.equal(reply.status, 500, reply.text);
        assert.deepEqual(keysOf(reply.body), ['error_code', 'message', 'status']);
        assert.equal(reply.body.status, 'error');
        assert.equal(reply.body.error_code, 'internal_server_error');
        assert.doesNotMatch(reply.body.message, /messages|relation|table|sql/i);
      }
      const lookedUp = await lookup(lipa, key, sent.body.data.id);
      assert.equal(lookedUp.status, 500, lookedUp.text);
      assert.deepEqual(lookedUp.body, { status: 'error', message: lookedUp.body.message, error_code: 'internal_server_error' });
    } finally {
      await sql`alter table messages_elsewhere rename to messages`.execute(lipa.ctx.store.db);
    }
    assert.equal(await countMessages(lipa), before);
    assert.equal((await send(lipa, key, sms())).status, 201, 'the service works again once storage is back');
  });
});

describe('messaging over SMTP', () => {
  let peer: SmtpPeer;
  let lipa: Lipa;
  let key: string;
  let token: string;
  before(async () => {
    // The peer offers no STARTTLS: the service verifies certificates and SMTP_URL has no way
    // to trust a self-signed one, so a STARTTLS peer here would never be delivered to.
    peer = await startSmtpPeer({
      rejectRecipients: ['nobody@example.com'],
      recipientReplies: {
        'gone@example.com': [550, '5.1.1 No such user'],
        'elsewhere@example.com': [550, '5.7.1 Relaying denied'],
        'sender-refused@example.com': [553, '5.1.8 <no-reply@lipa.local>: Sender address rejected: Domain not found'],
        'relay@example.com': [550, 'relay not permitted'],
        'rcpthosts@example.com': [553, "sorry, that domain isn't in my list of allowed rcpthosts"],
        'grey1@example.com': [450, '4.7.1 <grey1@example.com>: Recipient address rejected: Greylisted'],
        'grey2@example.com': [450, '4.7.1 <grey2@example.com>: Recipient address rejected: Greylisted'],
      },
    });
    lipa = await startLipa({ SMTP_URL: peer.url });
    const merchant = await createMerchant(lipa);
    token = await loginOverSmtp(lipa, peer, merchant);
    key = (await messagingKey(lipa, token)).apiKey;
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  test('a text email reaches the SMTP server with recipient, subject and body; the API answers 200 and GET shows sent', async () => {
    const reply = await send(lipa, key, email({ email: 'achieng@example.com', subject: 'Receipt 42', content: 'Paid KES 1,500.' }));
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
    assert.equal(reply.body.status, 'success');
    const id = reply.body.id;
    await until('the email at the SMTP server', () => mailFor(peer, id) !== undefined);
    const mail = mailFor(peer, id) as ReceivedMail;
    assert.deepEqual(mail.to, ['achieng@example.com']);
    assert.equal(mail.subject, 'Receipt 42');
    assert.equal(mail.contentType, 'text/plain');
    assert.equal(mail.text?.trim(), 'Paid KES 1,500.');
    assert.equal(mail.html, null);

    const data = await waitForStatus(lipa, key, id, ['sent']);
    assert.equal(data.status, 'sent');
    assert.equal(data.email, 'achieng@example.com');
  });

  test('content_type html arrives as text/html; the same HTML without content_type arrives as text/plain', async () => {
    const content = '<h1>Asante!</h1><p>Order <b>42</b> is paid.</p>';
    const asHtml = await send(lipa, key, email({ email: 'html@example.com', content, content_type: 'html' }));
    const asText = await send(lipa, key, email({ email: 'text@example.com', content }));
    assert.equal(asHtml.status, 200, asHtml.text);
    assert.equal(asText.status, 200, asText.text);
    await until('both emails', () => mailFor(peer, asHtml.body.id) !== undefined && mailFor(peer, asText.body.id) !== undefined);

    const html = mailFor(peer, asHtml.body.id) as ReceivedMail;
    assert.equal(html.contentType, 'text/html');
    assert.deepEqual(html.to, ['html@example.com']);
    assert.match(html.html ?? '', /<h1>Asante!<\/h1>/);

    const text = mailFor(peer, asText.body.id) as ReceivedMail;
    assert.equal(text.contentType, 'text/plain');
    assert.equal(text.html, null);
    assert.equal(text.text?.trim(), content, 'the markup arrives as literal text');

    assert.equal((await waitForStatus(lipa, key, asHtml.body.id, ['sent'])).content_type, 'html');
    assert.equal((await waitForStatus(lipa, key, asText.body.id, ['sent'])).content_type, 'text');
    // The operator's outbox tells them apart too.
    const outbox = (await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200')).body as Array<{ id: string; contentType: string | null }>;
    assert.equal(outbox.find((m) => m.id === asHtml.body.id)?.contentType, 'html');
    assert.equal(outbox.find((m) => m.id === asText.body.id)?.contentType, 'text');
  });

  test('a recipient the server says does not exist is the invalid-recipient 500, and the message is kept as failed', async () => {
    for (const [address, reason] of [
      ['nobody@example.com', 'Refused by the mail server: 550.'],
      ['gone@example.com', 'Refused by the mail server: 550 5.1.1.'],
    ]) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 500, reply.text);
      assert.equal(typeof reply.body, 'string', 'a bare JSON string, as for an address that fails the syntax check');
      assert.match(
        reply.body,
        new RegExp(`^The recipient email address is invalid: ${address} \\(the mail server refused it; message msg_`),
      );
      const id = /message (msg_[0-9A-Za-z_-]+)\)$/.exec(reply.body)?.[1] as string;
      const data = await waitForStatus(lipa, key, id, ['failed', 'sent', 'delivered']);
      assert.equal(data.status, 'failed');
      assert.equal(data.error, reason, 'the lookup says why, naming no host');
      const row = await messageRow(lipa, id);
      assert.match(row.last_error ?? '', /550/);
      assert.equal(row.attempts, 1, 'a permanent refusal is not retried');
      assert.equal(mailFor(peer, id), undefined);
    }
  });

  test('a refusal at RCPT TO about the sender or relaying (5.7.1, 5.1.8, a bare 550/553 saying so) is accepted-then-failed, not an invalid address', async () => {
    for (const [address, error] of [
      ['sender-refused@example.com', 'Refused by the mail server: 553 5.1.8.'],
      ['relay@example.com', 'Refused by the mail server: 550.'],
      ['rcpthosts@example.com', 'Refused by the mail server: 553.'],
    ]) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 200, `${address}: ${reply.text}`);
      const data = await waitForStatus(lipa, key, reply.body.id, ['failed', 'sent', 'delivered']);
      assert.deepEqual([data.status, data.error], ['failed', error], address);
    }
    const reply = await send(lipa, key, email({ email: 'elsewhere@example.com' }));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.body.status, 'success');
    assert.match(reply.body.message, /refused/);
    const data = await waitForStatus(lipa, key, reply.body.id, ['failed', 'sent', 'delivered']);
    assert.equal(data.status, 'failed');
    assert.equal(data.error, 'Refused by the mail server: 550 5.7.1.');
    // The merchant's list shows the same, reason included.
    const listed = await call(lipa.url, 'GET', '/api/v1/messages?limit=200', { token });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.find((m: { id: string }) => m.id === reply.body.id),
      data,
    );
  });

  test('a transient refusal naming the recipient is logged once for all recipients, without their addresses', async () => {
    for (const address of ['grey1@example.com', 'grey2@example.com']) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.body.message, 'Email accepted and queued for delivery');
    }
    const warnings = lipa.logs.filter((line) => line.includes('message not sent, will retry') && line.includes('450'));
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.ok(!/grey[12]@/.test(warnings[0] ?? ''), warnings[0]);
    assert.match(warnings[0] ?? '', /<address>/);
  });

  test('a merchant login OTP goes out over SMTP, works at confirm, and the stored copy hides the digits', async () => {
    const merchant = await createMerchant(lipa);
    const skip = peer.received.length;
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    assert.equal(started.status, 200, started.text);
    const { code, mail } = await otpFromPeer(peer, merchant.login, skip);
    assert.deepEqual(mail.to, [merchant.login]);
    assert.equal(mail.contentType, 'text/plain');

    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);
    assert.equal(typeof confirmed.body.token, 'string');

    type OutboxEntry = { to: string; purpose: string; content: string; status: string };
    let entry: OutboxEntry | undefined;
    await until('the OTP email recorded as sent', async () => {
      const outbox = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
      assert.equal(outbox.status, 200, outbox.text);
      entry = (outbox.body as OutboxEntry[]).find((m) => m.to === merchant.login && m.purpose === 'otp');
      return entry?.status === 'sent';
    });
    const stored = (entry as OutboxEntry).content;
    assert.ok(!stored.includes(code), `the code is not in the stored copy: ${stored}`);
    assert.doesNotMatch(stored, /[0-9]{6}/);
    assert.match(stored, /\*{6}/);
  });
});

describe("messaging over a slow SMTP server: the service's own messages first", () => {
  let peer: SmtpPeer;
  let lipa: Lipa;
  before(async () => {
    // Each message takes the server 300 ms; the service keeps 5 connections.
    peer = await startSmtpPeer({ replyDelayMs: 300 });
    lipa = await startLipa({ SMTP_URL: peer.url });
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  test("a login code goes out ahead of a merchant's backlog to the same server, and works", async () => {
    const merchant = await createMerchant(lipa);
    const token = await loginOverSmtp(lipa, peer, merchant);
    const key = (await messagingKey(lipa, token)).apiKey;
    const skip = peer.received.length;
    // 40 emails take the server at least 2.4 s; the API answers each within its 2 s wait.
    const backlog = Array.from({ length: 40 }, (_, i) => send(lipa, key, email({ email: `backlog${i}@example.com` })));
    await peer.waitFor(skip + 1);
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    assert.equal(started.status, 200, started.text);
    const arrivedBeforeCode = peer.received.length - skip;
    const { code, mail } = await otpFromPeer(peer, merchant.login, skip);
    const ahead = peer.received.slice(skip, peer.received.indexOf(mail)).length;
    // Those that had arrived when the code was queued, and at most two rounds of the 5 on the
    // wire while the worker picked it up; never the rest of the backlog.
    assert.ok(
      ahead <= arrivedBeforeCode + 10,
      `the code came after ${ahead} of the 40 backlog emails (${arrivedBeforeCode} when it was queued)`,
    );
    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);

    for (const reply of await Promise.all(backlog)) assert.equal(reply.status, 200, reply.text);
    await peer.waitFor(skip + 41, 20_000);
    const backlogTo = new Set(peer.received.slice(skip).flatMap((m) => m.to.filter((to) => to.startsWith('backlog'))));
    assert.equal(backlogTo.size, 40, 'every backlog email arrived too');
  });
});

describe("delivery receipts that overtake the submission, over another instance's bind", () => {
  test('two instances, one SMSC: every receipt sent before its submit_sm_resp, over the other bind, is applied once', async () => {
    // The SMSC answers each submit_sm 400 ms late, and sends its receipt at once over the
    // other instance's bind: the receipt always arrives before the submission is on record.
    const peer = await startSmppPeer({ receipts: true, receiptDelayMs: 0, submitDelayMs: 400, receiptsViaOtherSession: true });
    const first = await startLipa({ SMPP_URL: peer.url });
    const second = await startLipa({ SMPP_URL: peer.url, DATABASE_URL: first.databaseUrl });
    try {
      const session = await merchantSession(first);
      const key = (await messagingKey(first, session.token)).apiKey;
      // Both bound before the first send, so that even its receipt has another bind to come over.
      await Promise.all([first, second].map((lipa) => (lipa.ctx.messenger.transports.sms as SmppTransport).ready()));
      assert.equal(peer.binds, 2);
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const reply = await send(i % 2 ? second : first, key, sms({ content: `Early receipt ${i}` }));
        assert.equal(reply.status, 201, reply.text);
        ids.push(reply.body.data.id);
      }
      for (const id of ids) assert.equal((await waitForStatus(first, key, id, ['delivered', 'failed'], 8_000)).status, 'delivered', id);
      assert.equal(peer.submitted.length, 10, 'each submitted once');
      assert.ok(peer.receiptAnswers.length >= 10 && peer.receiptAnswers.every((status) => status === 0), 'every receipt acknowledged');
      const kept = await first.ctx.store.db.selectFrom('early_receipts').select('provider_id').execute();
      assert.deepEqual(kept, [], 'nothing left waiting');
    } finally {
      await second.close();
      await first.close();
      await peer.close();
    }
  });
});

describe('messaging over SMPP', () => {
  const UNDELIVERABLE = '254733000111';
  const REFUSED = '254733000222';
  let peer: SmppPeer;
  let lipa: Lipa;
  let key: string;
  before(async () => {
    // Receipts come 1.5 s after the submission (a real SMSC's come later still), so that a
    // test sees the message sent before it is delivered.
    peer = await startSmppPeer({ receipts: true, receiptDelayMs: 1_500, undeliverable: [UNDELIVERABLE], rejectDestinations: [REFUSED] });
    // A short code sender, with the TON this SMSC wants for it (0) instead of the one read from it (3).
    lipa = await startLipa({ SMPP_URL: peer.url, SMPP_SOURCE_ADDR: '22555', SMPP_SOURCE_TON: '0' });
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  const submittedFor = async (lipa: Lipa, id: string) => {
    const row = await messageRow(lipa, id);
    return peer.submitted.find((s) => row.provider_id !== null && s.messageId === row.provider_id);
  };

  test('the SMSC receives submit_sm to country code + number with the text; 201; the receipt makes it delivered', async () => {
    const count = peer.submitted.length;
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000333' }, content: 'Order 7 is on its way.' }));
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(keysOf(reply.body), ['data', 'message']);
    assert.deepEqual(keysOf(reply.body.data), ['id', 'status']);
    // The answer carries the first attempt's outcome when it comes within 2 s (else queued).
    assert.ok(['queued', 'sent', 'delivered'].includes(reply.body.data.status), reply.text);
    const id = reply.body.data.id;

    const submitted = (await peer.waitFor(count + 1)).at(-1);
    // Sent once the SMSC took it; delivered only by the receipt that follows.
    assert.equal((await waitForStatus(lipa, key, id, ['sent', 'delivered', 'failed'])).status, 'sent');
    assert.equal(submitted?.destination, '254722000333');
    assert.equal(submitted?.text, 'Order 7 is on its way.');
    assert.equal(submitted?.dataCoding, 0);
    assert.equal(submitted?.registeredDelivery ?? 0, 1);
    assert.deepEqual([submitted?.source, submitted?.sourceTon, submitted?.sourceNpi], ['22555', 0, 0], 'SMPP_SOURCE_ADDR and _TON');

    const data = await waitForStatus(lipa, key, id, ['delivered', 'failed']);
    assert.equal(data.status, 'delivered');
    assert.deepEqual(data.phone, { number: '******333', country_code: '254' });
    assert.equal((await messageRow(lipa, id)).provider_id, submitted?.messageId);
  });

  test('SMPP_SOURCE_TON and SMPP_SOURCE_NPI are whole numbers 0-255, unset by default', () => {
    for (const bad of ['256', '-1', 'x', '1.5']) assert.throws(() => loadConfig({ SMPP_SOURCE_TON: bad }), /SMPP_SOURCE_TON/, bad);
    assert.equal(loadConfig({ SMPP_SOURCE_NPI: '9' }).smppSourceNpi, 9);
    assert.deepEqual([loadConfig({}).smppSourceTon, loadConfig({}).smppSourceNpi], [null, null]);
  });

  test('a number written with its trunk prefix goes out in international form', async () => {
    // 0722000555 is how Kenyans write +254 722000555; sent as 2540722000555 it would reach nobody.
    for (const [countryCode, number, destination] of [
      ['254', '0722000555', '254722000555'],
      ['44', '07400123456', '447400123456'],
    ]) {
      const reply = await send(lipa, key, sms({ phone: { country_code: countryCode, number }, content: 'Trunk prefix' }));
      assert.equal(reply.status, 201, reply.text);
      await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
      assert.equal((await submittedFor(lipa, reply.body.data.id))?.destination, destination);
    }
  });

  test('a UCS-2 text goes out with data_coding 8', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000444' }, content: 'Asante 😀' }));
    assert.equal(reply.status, 201, reply.text);
    await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
    const submitted = await submittedFor(lipa, reply.body.data.id);
    assert.equal(submitted?.destination, '254722000444');
    assert.equal(submitted?.dataCoding, 8);
  });

  test('a number the SMSC reports UNDELIV ends failed', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: UNDELIVERABLE.slice(3) } }));
    assert.equal(reply.status, 201, reply.text);
    const id = reply.body.data.id;
    const data = await waitForStatus(lipa, key, id, ['delivered', 'failed']);
    assert.equal(data.status, 'failed');
    assert.match(data.error ?? '', /^The SMS centre reported it not delivered: UNDELIV\b/);
    assert.match((await messageRow(lipa, id)).last_error ?? '', /UNDELIV/);
    assert.equal((await submittedFor(lipa, id))?.destination, UNDELIVERABLE);
  });

  test('a number the SMSC refuses ends failed at once, and the lookup says which status it gave', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: REFUSED.slice(3) } }));
    assert.equal(reply.status, 201, reply.text);
    const data = await waitForStatus(lipa, key, reply.body.data.id, ['failed']);
    assert.equal(data.error, 'Refused by the SMS centre: ESME_RINVDSTADR (0x0B, invalid destination address).');
    const row = await messageRow(lipa, reply.body.data.id);
    assert.equal(row.attempts, 1, 'a permanent refusal is not retried');
    assert.match(row.last_error ?? '', /^SMSC rejected submit_sm: ESME_RINVDSTADR/);
  });

  test('a dropped connection is bound again and later messages go out', async () => {
    const binds = peer.binds;
    peer.dropConnections();
    await until('a new bind', () => peer.binds > binds);
    const reply = await send(lipa, key, sms({ content: 'After the drop' }));
    assert.equal(reply.status, 201, reply.text);
    const data = await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
    assert.equal(data.status, 'delivered');
    assert.equal((await submittedFor(lipa, reply.body.data.id))?.text, 'After the drop');
  });

  test('messages sent while the SMSC is down are queued, then go out once it is back', async () => {
    await peer.stop();
    try {
      const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000555' }, content: 'During the outage' }));
      assert.equal(reply.status, 201, reply.text);
      assert.equal(reply.body.data.status, 'queued');
      const id = reply.body.data.id;
      assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
      // Stay down past the transport's first reconnect attempt.
      await sleep(700);
      assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
      await peer.start();
      const data = await waitForStatus(lipa, key, id, ['delivered', 'failed'], 12_000);
      assert.equal(data.status, 'delivered');
      const submitted = await submittedFor(lipa, id);
      assert.equal(submitted?.destination, '254722000555');
      assert.equal(submitted?.text, 'During the outage');
    } finally {
      await peer.start();
    }
  });

  test("a payer's login OTP SMS goes out over SMPP and works at confirm; the stored copy hides the digits", async () => {
    const payer = await createPayer(lipa);
    const count = peer.submitted.length;
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
    assert.equal(started.status, 200, started.text);
    await until('the OTP SMS', () => peer.submitted.slice(count).some((s) => s.destination === payer.phone));
    const submitted = peer.submitted.slice(count).find((s) => s.destination === payer.phone);
    const code = submitted?.text.match(/\b([0-9]{6})\b/)?.[1];
    assert.ok(code, `a 6-digit code in ${submitted?.text}`);

    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: payer.phone, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);

    const row = await lipa.ctx.store.db
      .selectFrom('messages')
      .selectAll()
      .where('purpose', '=', 'otp')
      .where('type', '=', 'sms')
      .where('phone_number', '=', payer.phone.slice(3))
      .executeTakeFirstOrThrow();
    await until('the OTP SMS recorded', async () => ['sent', 'delivered'].includes((await messageRow(lipa, row.id)).status));
    const stored = (await messageRow(lipa, row.id)).content;
    assert.ok(!stored.includes(code), stored);
    assert.match(stored, /\*{6}/);
  });
});

describe('messaging while the SMTP server is unreachable', () => {
  let down: Awaited<ReturnType<typeof downServer>>;
  let lipa: Lipa;
  let key: string;
  let peer: SmtpPeer | null = null;
  before(async () => {
    down = await downServer();
    lipa = await startLipa({ SMTP_URL: `smtp://127.0.0.1:${down.port}` });
    // The login OTP email is queued too; its stored copy still holds the code (not yet sent).
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
    // Drop it, so that the only message retried here is the test's own: a retry still running
    // when the service closes would end in an unhandled rejection (see the Messenger's worker).
    await lipa.ctx.store.db.deleteFrom('messages').where('purpose', '=', 'otp').execute();
  });
  after(async () => {
    await lipa.close();
    await peer?.close();
    await down.release();
  });

  test('an email is stored and queued, retried with back-off, and sent once a server listens', async () => {
    const reply = await send(lipa, key, email({ email: 'later@example.com', subject: 'Queued' }));
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
    assert.equal(reply.body.status, 'success');
    const id = reply.body.id;

    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    // The answer waited up to 2 s for the first attempt; under load its outcome may come later.
    await until('the first attempt', async () => (await messageRow(lipa, id)).attempts >= 1, 6_000);
    const first = await messageRow(lipa, id);
    assert.equal(first.status, 'queued');
    assert.ok(first.attempts >= 1, `attempts ${first.attempts}`);
    assert.ok((first.last_error ?? '').length > 0, 'last_error is set');
    assert.ok(first.next_attempt_at > first.updated_at, 'the next try is later');

    await until('a second attempt', async () => (await messageRow(lipa, id)).attempts >= 2, 6_000);
    const second = await messageRow(lipa, id);
    assert.equal(second.status, 'queued');
    assert.ok((second.last_error ?? '').length > 0);
    // Back-off: the gap after the second attempt is longer than after the first (2 s, then 4 s, ±20 %).
    assert.ok(
      second.next_attempt_at - second.updated_at > first.next_attempt_at - first.updated_at,
      `back-off grows: ${first.next_attempt_at - first.updated_at} then ${second.next_attempt_at - second.updated_at}`,
    );
    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    // The operator is told why, once a minute for the same failure, not once a try.
    const warnings = lipa.logs.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'message not sent, will retry');
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0].level, 40);
    assert.equal(warnings[0].type, 'email');
    assert.match(warnings[0].error, new RegExp(`smtp://127\\.0\\.0\\.1:${down.port}`));

    await down.release();
    peer = await startSmtpPeer({ port: down.port });
    const data = await waitForStatus(lipa, key, id, ['sent', 'failed'], 12_000);
    assert.equal(data.status, 'sent');
    const mail = mailFor(peer, id);
    assert.deepEqual(mail?.to, ['later@example.com']);
    assert.equal(mail?.subject, 'Queued');
    const done = await messageRow(lipa, id);
    assert.ok(done.attempts >= 3, `attempts ${done.attempts}`);
    assert.equal(done.last_error, null);
  });
});

describe('messaging when the SMTP server stays unreachable for the whole retry window', () => {
  let down: Awaited<ReturnType<typeof downServer>>;
  let lipa: Lipa;
  before(async () => {
    down = await downServer();
    lipa = await startLipa({ SMTP_URL: `smtp://127.0.0.1:${down.port}`, MESSAGE_RETRY_WINDOW_SECONDS: '5' });
  });
  after(async () => {
    await lipa.close();
    await down.release();
  });

  test('it is retried until the window ends, then failed with a reason that names no internal host', async () => {
    const session = await merchantSession(lipa);
    const key = (await messagingKey(lipa, session.token)).apiKey;
    await lipa.ctx.store.db.deleteFrom('messages').where('purpose', '=', 'otp').execute();
    const reply = await send(lipa, key, email({ email: 'never@example.com' }));
    assert.equal(reply.status, 200, reply.text);
    const id = reply.body.id;
    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    const data = await waitForStatus(lipa, key, id, ['failed', 'sent'], 20_000);
    assert.equal(data.status, 'failed');
    const row = await messageRow(lipa, id);
    assert.ok(row.attempts >= 2, `retried: ${row.attempts} tries`);
    assert.ok(Date.now() - Date.parse(data.created_at) >= 4_000, 'not failed before its window (about 5 s) ended');
    assert.match(row.last_error ?? '', /gave up after \d+ tries in 5 s; the last: /, 'the operator keeps the detail');
    assert.match(data.error ?? '', /^Not sent: the mail server could not be reached/);
    assert.ok(!(data.error ?? '').includes('127.0.0.1'), data.error);
  });
});
