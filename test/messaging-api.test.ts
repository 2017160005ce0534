import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { call, merchantSession, type Reply } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import {
  type Body,
  countMessages,
  email,
  keysOf,
  lookup,
  MESSAGE_ID,
  messageRow,
  messagingKey,
  send,
  sleep,
  sms,
} from './helpers/messaging.js';

/**
 * The messaging API (endpoints 7 and 8, CONTRACT §8) over HTTP against the real service, on
 * the embedded outbox: the interface's answer shapes, refusals that store nothing, segment
 * counting, ownership, the per-key rate limit, and an unexpected failure.
 */

describe('messaging API: answers and refusals (embedded outbox)', () => {
  let lipa: Lipa;
  let keyA: string;
  let keyA2: string;
  let keyB: string;
  before(async () => {
    // The per-key limit has its own tests (below); here tests send bursts with one key.
    lipa = await startLipa({ RATE_LIMIT_KEY_PER_SEC: '1000' });
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
    const raw = JSON.stringify({ message: email() });
    const rawCases = [
      ['the subject twice (JSON read two ways)', raw.replace('"subject":', '"subject":"Other","subject":')],
      ['a __proto__ member', raw.replace('"subject":', '"__proto__":{},"subject":')],
      ['a constructor.prototype member', raw.replace('"subject":', '"constructor":{"prototype":{}},"subject":')],
    ] as const;
    for (const [name, message] of [...cases, ...rawCases]) {
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
    // Two recipients as a list: the answer says what is wrong, not that the address is missing.
    const list = await send(lipa, keyA, email({ email: ['a@x.com', 'b@y.com'] }));
    assert.equal(list.status, 400, list.text);
    assert.equal(list.body.message, 'An email has exactly one recipient: message.email is one address, not a list.');
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
      const found = await lookup(lipa, keyA, id);
      assert.equal(found.status, 200, `${name}: ${found.text}`);
      assert.equal(found.body.data.segments, segments, name);
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
