import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { OPEN_WORK } from '../src/ops/metrics.js';
import { assertError } from './helpers/assertions.js';
import { call, createPayer, merchantSession, payerToken, sendBytes } from './helpers/client.js';
import { type Lipa, ON_POSTGRES, startLipa } from './helpers/harness.js';
import { checkAgainstOpenApi, checkedFetch } from './helpers/openapi-check.js';

describe('HTTP hygiene', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('an unknown path answers 404 in the error shape, with X-Request-Id', async () => {
    const reply = await call(lipa.url, 'GET', '/api/v1/nothing-here');
    assert.equal(reply.status, 404);
    assert.equal(reply.body.error.code, 'not_found');
    assert.equal(typeof reply.body.error.message, 'string');
    assert.equal(reply.body.requestId, reply.headers.get('x-request-id'));
  });

  test('a known path with the wrong method is an invalid endpoint: 404, with Allow naming the methods it takes', async () => {
    const reply = await call(lipa.url, 'PUT', '/api/v1/authorization', { body: {} });
    assert.equal(reply.status, 404);
    assert.equal(reply.body.error.code, 'not_found');
    assert.equal(reply.headers.get('allow'), 'POST, DELETE');
    const create = await call(lipa.url, 'GET', '/api/public/v1/merchant-payments');
    assert.equal(create.status, 404);
    assert.equal(create.headers.get('allow'), 'POST');
    // Under the messaging API, its own 404 shape.
    const messages = await call(lipa.url, 'GET', '/api/messages', { headers: { api_key: 'wrong' } });
    assert.equal(messages.status, 404, messages.text);
    assert.deepEqual(messages.body, { message: 'No endpoint GET /api/messages. /api/messages takes POST.', error_code: 'not_found' });
    assert.equal(messages.headers.get('allow'), 'POST');
    // A path under it that names no endpoint says so too, rather than "Message not found.".
    const deeper = await call(lipa.url, 'GET', '/api/messages/msg_1/extra', { headers: { api_key: 'wrong' } });
    assert.deepEqual(deeper.body, { message: 'No endpoint GET /api/messages/msg_1/extra.', error_code: 'not_found' });
  });

  test('/docs is sent with a content security policy and may not be framed', async () => {
    const reply = await call(lipa.url, 'GET', '/docs/');
    assert.equal(reply.status, 200);
    const policy = reply.headers.get('content-security-policy') ?? '';
    assert.match(policy, /frame-ancestors 'none'/);
    assert.match(policy, /script-src 'self'/);
    assert.doesNotMatch(policy, /upgrade-insecure-requests/, 'staging serves it over plain http');
    assert.equal(reply.headers.get('x-frame-options'), 'DENY');
  });

  test('an unknown endpoint is 404 whatever the body: a body over the limit is not read first (no 413)', async () => {
    const big = JSON.stringify({ filler: 'x'.repeat(200 * 1024) });
    for (const path of ['/nope', '/api/v1/nope']) {
      const reply = await call(lipa.url, 'POST', path, { raw: big });
      assertError(reply, 404, 'not_found');
    }
    const messaging = await call(lipa.url, 'POST', '/api/messages/x/y', { raw: big });
    assert.equal(messaging.status, 404);
    assert.deepEqual(messaging.body, { message: messaging.body.message, error_code: 'not_found' });
    // A known endpoint still refuses the same body as too large.
    assertError(await call(lipa.url, 'POST', '/api/v1/authorization', { raw: big }), 413, 'payload_too_large');
  });

  test('a safe incoming X-Request-Id is kept; an unsafe one is replaced', async () => {
    const kept = await call(lipa.url, 'GET', '/health', { headers: { 'x-request-id': 'abc-123' } });
    assert.equal(kept.headers.get('x-request-id'), 'abc-123');
    const replaced = await call(lipa.url, 'GET', '/health', { headers: { 'x-request-id': 'bad id\twith spaces' } });
    assert.notEqual(replaced.headers.get('x-request-id'), 'bad id\twith spaces');
    assert.match(replaced.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  test('malformed JSON answers 422 invalid_json, never 500', async () => {
    for (const raw of ['{"login":', '{', 'nope', '[1,2', '"\\u00"']) {
      const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { raw });
      assert.equal(reply.status, 422, raw);
      assert.equal(reply.body.error.code, 'invalid_json', raw);
    }
  });

  test('no body, or an empty one, is 422 invalid_json (it is not JSON), whether or not a content type is sent', async () => {
    const token = (await merchantSession(lipa)).token;
    for (const [path, headers] of [
      ['/api/v1/authorization', {}],
      ['/api/v1/authorization/confirm', {}],
      ['/api/v1/points-of-sale', { authorization: `Bearer ${token}` }],
    ] as const) {
      for (const contentType of [undefined, 'application/json']) {
        const response = await checkedFetch(`${lipa.url}${path}`, {
          method: 'POST',
          headers: { ...headers, ...(contentType ? { 'content-type': contentType } : {}) },
        });
        const body = (await response.json()) as { error: { code: string; message: string } };
        assert.equal(response.status, 422, `${path} ${contentType}`);
        assert.deepEqual(body.error, { code: 'invalid_json', message: 'The body is empty; send a JSON object.' }, `${path} ${contentType}`);
      }
    }
    // A JSON value that is not an object is JSON: the schema says what is wrong with it.
    const array = await call(lipa.url, 'POST', '/api/v1/authorization', { raw: '[]' });
    assert.equal(array.body.error.code, 'validation_failed');
  });

  test('a body that is not valid UTF-8 is 422 invalid_json, not read with U+FFFD in it', async () => {
    const bytes = Buffer.concat([Buffer.from('{"login":"a'), Buffer.from([0xc3, 0x28]), Buffer.from('@b.c","password":"x"}')]);
    const response = await checkedFetch(`${lipa.url}/api/v1/authorization`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: bytes,
    });
    assert.equal(response.status, 422);
    assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'invalid_json');
  });

  const sendRaw = (bytes: string) => sendBytes(lipa.url, bytes);

  /** An answer written as `statusLine`, in the one error body, its requestId the X-Request-Id header. */
  const assertRawError = (answer: string, statusLine: string, code: string, message: string) => {
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    assert.ok(head.startsWith(`HTTP/1.1 ${statusLine}\r\n`), answer);
    const requestId = /\r\nX-Request-Id: ([0-9a-f-]{36})\r\n/i.exec(head)?.[1];
    assert.ok(requestId, head);
    // The headers every answer has, also when the answer is written before any route.
    assert.match(head, /\r\nX-Content-Type-Options: nosniff\r\n/i, head);
    assert.match(head, /\r\nReferrer-Policy: no-referrer\r\n/i, head);
    assert.deepEqual(JSON.parse(body), { error: { code, message }, requestId });
  };
  const assertMalformed = (answer: string, message: string) => assertRawError(answer, '400 Bad Request', 'malformed_request', message);
  /** The messaging API's own 400, written before any route. */
  const assertMessagingBadRequest = (answer: string, message: string) => {
    assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/, answer);
    assert.deepEqual(JSON.parse(answer.split('\r\n\r\n')[1] ?? ''), { status: 'error', message, error_code: 'bad_request' });
  };

  test('a request the HTTP parser refuses still gets the error body and an X-Request-Id', async () => {
    const answer = await sendRaw('POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nX-Service-Nonce: abc\x7fdef\r\n\r\n');
    assertMalformed(answer, 'The request is not valid HTTP/1.1.');
  });

  test('an HTTP/1.1 request without a Host header, or with two, is 400 malformed_request in the error body', async () => {
    for (const head of ['GET /health HTTP/1.1\r\n\r\n', 'GET /health HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n']) {
      assertMalformed(await sendRaw(head), 'The request must have exactly one Host header.');
    }
  });

  test('a Host header that is not a host and a port is 400 malformed_request; every host form a client writes is taken', async () => {
    for (const host of [
      'evil.example/x',
      'evil.example?x',
      'evil.example:abc',
      'a@evil.example',
      '"><script>',
      'a b',
      '[::1',
      'x:1:2',
      'x:65536',
    ]) {
      assertMalformed(
        await sendRaw(`GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
        'The Host header must be a host name or address, and a port if any.',
      );
    }
    for (const host of [
      'localhost',
      'LocalHost:8080',
      '127.0.0.1:80',
      '[::1]:8443',
      '[2001:db8::1]',
      'pay_1.example.com',
      'xn--bcher-kva.example',
      'x:65535',
      'example.com.',
    ]) {
      const answer = await sendRaw(`GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/, `${host}: ${answer}`);
    }
  });

  test('an Expect other than 100-continue is 417 in the error body, before the body is read', async () => {
    const answer = await sendRaw(
      'POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    assertRawError(answer, '417 Expectation Failed', 'expectation_failed', 'The only Expect this service meets is 100-continue.');
    // The messaging API, which has no 417 in the interface, answers with its 400.
    const messaging = await sendRaw(
      'POST /api/messages HTTP/1.1\r\nHost: x\r\napi_key: k\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    assertMessagingBadRequest(messaging, 'The only Expect this service meets is 100-continue.');
    // 100-continue is met: the client is told to go on, and the request is answered.
    const goOn = await sendRaw(
      'POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    );
    assert.match(goOn, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 422 /, goOn);
  });

  test('two Content-Type headers are 400 malformed_request (the messaging API: its 400), before the body is read', async () => {
    for (const [first, second] of [
      ['application/json', 'text/plain'],
      ['application/json', 'application/json'],
    ]) {
      const answer = await sendRaw(
        `POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nContent-Type: ${first}\r\ncontent-type: ${second}\r\nContent-Length: 2\r\n\r\n{}`,
      );
      assertMalformed(answer, 'The request must have at most one Content-Type header.');
    }
    const messaging = await sendRaw(
      'POST /api/messages HTTP/1.1\r\nHost: x\r\napi_key: k\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}',
    );
    assertMessagingBadRequest(messaging, 'The request must have at most one Content-Type header.');
    // One is answered as usual.
    const one = await sendRaw(
      'POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    );
    assert.match(one, /^HTTP\/1\.1 422 /, one);
  });

  test('CONNECT is 404 in the error body: the service is not a proxy', async () => {
    const answer = await sendRaw('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assertRawError(answer, '404 Not Found', 'not_found', 'No endpoint CONNECT example.com:443: this service is not a proxy.');
  });

  test('a fault in a request body is answered at once, after the requests before it', async () => {
    const badChunk =
      'POST /api/v1/authorization HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n';
    const started = Date.now();
    assertMalformed(await sendRaw(badChunk), 'The request is not valid HTTP/1.1.');
    const answers = (await sendRaw(`GET /health HTTP/1.1\r\nHost: x\r\n\r\n${badChunk}`)).split(/(?=HTTP\/1\.1 \d{3} )/);
    assert.deepEqual(
      answers.map((a) => a.slice(0, 12)),
      ['HTTP/1.1 200', 'HTTP/1.1 400'],
    );
    assert.ok(Date.now() - started < 5000, 'not held until a timeout');
  });

  test('a CONNECT whose client resets at once leaves the service up', async () => {
    for (let i = 0; i < 5; i++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(new URL(lipa.url).port), '127.0.0.1', () => {
          socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n');
          socket.resetAndDestroy();
          resolve();
        });
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal((await call(lipa.url, 'GET', '/health')).status, 200);
  });

  test('requests pipelined before a malformed one get their answers, in order, before its 400', async () => {
    const answer = await sendRaw('GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /ready HTTP/1.1\r\nHost: x\r\n\r\nNOT HTTP\r\n\r\n');
    const answers = answer.split(/(?=HTTP\/1\.1 \d{3} )/);
    assert.deepEqual(
      answers.map((a) => a.slice(0, 12)),
      ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 400'],
      answer,
    );
    assert.match(answers[0] ?? '', /\r\n\r\n\{"status":"ok"\}$/);
    assert.match(answers[1] ?? '', /\r\n\r\n\{"status":"ready"\}$/);
    assertMalformed(answers[2] ?? '', 'The request is not valid HTTP/1.1.');
  });

  test('JSON that could be read two ways is 422 invalid_json, saying why', async () => {
    const cases: Array<[string, string]> = [
      ['{"login":"a@b.c","password":"x","login":"c@d.e"}', 'the member "login" appears twice in one object'],
      ['{"login":"a@b.c","\\u0070assword":"x","password":"y"}', 'the member "password" appears twice in one object'],
      ['{"login":"a@b.c\\udc00","password":"x"}', 'has a lone surrogate'],
      ['{"login":"a@b.c\\u0000","password":"x"}', 'has a NUL character'],
      ['{"login":"a@b.c","password":"x","n":12345678901234567}', 'more than 15 significant digits'],
      ['{"login":"a@b.c","password":"x","n":1e400}', 'out of the range'],
      ['{"login":"a@b.c","password":"x","n":-1E-400}', 'out of the range'],
    ];
    for (const [raw, why] of cases) {
      const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { raw });
      assert.equal(reply.status, 422, raw);
      assert.equal(reply.body.error.code, 'invalid_json', raw);
      assert.ok(reply.body.error.message.includes(why), `${raw}: ${reply.body.error.message}`);
    }
    // The answer names the member, as a validation error does.
    for (const [raw, field] of [
      ['{"login":"a@b.c","password":"x","login":"c@d.e"}', 'login'],
      ['{"payer":{"method":"phone","value":"1\\u0000"},"login":"a@b.c"}', 'payer.value'],
      ['{"login":"a@b.c","password":"x","urls":[{"a":1},{"a":1e400}]}', 'urls.1.a'],
    ] as const) {
      const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { raw });
      assert.equal(reply.body.error.code, 'invalid_json', raw);
      assert.deepEqual(
        reply.body.error.details.map((d: { field: string }) => d.field),
        [field],
        raw,
      );
      assert.ok(reply.body.error.message.endsWith(` (at ${field})`), reply.body.error.message);
    }
    // Not ambiguous: one name in two objects, a surrogate pair, an escaped backslash before "ud800".
    for (const raw of [
      '{"a":{"login":1},"login":"a@b.c","password":"x"}',
      '{"login":"\\ud83d\\ude00@b.c","password":"x"}',
      '{"login":"\\\\ud800","password":"x"}',
    ]) {
      const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { raw });
      assert.notEqual(reply.body?.error?.code, 'invalid_json', `${raw}: ${reply.text}`);
    }
  });

  test('a refused body is never repeated in the answer: it may hold a password', async () => {
    const secret = 'hunter2-Secret';
    for (const raw of [
      `{"login":"a@b.c","password":"${secret}\\u0000"}`,
      `{"login":"a@b.c","password":"${secret}\\udc00"}`,
      `x{"login":"a@b.c","password":"${secret}"}`,
      `{"login":"a@b.c","password":"${secret}","n":tru}`,
      // Longer bodies: V8 quotes some 10 characters each side of the fault.
      `{"login":"someone-with-a-long-login@example.com","password":${secret}}`,
      `{"login":"someone-with-a-long-login@example.com","password":"${secret}"x}`,
    ]) {
      for (const path of ['/api/v1/authorization', '/api/messages']) {
        const reply = await call(lipa.url, 'POST', path, { raw, headers: { api_key: 'k' } });
        assert.ok(reply.status >= 400, `${path} ${raw}: ${reply.status}`);
        assert.ok(!reply.text.includes(secret.slice(0, 7)), `${path} ${raw}: ${reply.text}`);
      }
    }
  });

  test('a NUL character (%00) in an id is 404 and in a query value 422, never 500 (PostgreSQL cannot store one)', async () => {
    const merchant = await merchantSession(lipa);
    const bearer = { authorization: `Bearer ${merchant.token}` };
    const messagingKey = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: merchant.token, body: {} });
    for (const [method, path, headers] of [
      ['DELETE', '/api/v1/api-keys/key%00x', bearer],
      ['DELETE', '/api/v1/messaging-keys/mk%00x', bearer],
      ['POST', '/api/v1/callbacks/evt%00x/redeliver', bearer],
    ] as const) {
      const reply = await call(lipa.url, method, path, { headers });
      assert.equal(reply.status, 404, `${path}: ${reply.text}`);
      assert.equal(reply.body.error.code, 'not_found', path);
    }
    const message = await call(lipa.url, 'GET', '/api/messages/msg%00x', { headers: { api_key: messagingKey.body.apiKey } });
    assert.equal(message.status, 404, message.text);
    assert.equal(message.body.error_code, 'not_found');
    const query = await call(lipa.url, 'GET', '/api/v1/callbacks?paymentIdentifier=pay%00x', { headers: bearer });
    assert.equal(query.status, 422, query.text);
    assert.equal(query.body.error.details[0].field, 'paymentIdentifier');
    // Also a parameter the route does not read (the harness checks /openapi.json lists the 422).
    const ignored = await call(lipa.url, 'GET', '/api/v1/me?x=%00', { headers: bearer });
    assert.equal(ignored.status, 422, ignored.text);
    assert.equal(ignored.body.error.details[0].field, 'x');
    // The messaging API's own 400.
    const lookup = await call(lipa.url, 'GET', '/api/messages/msg?x=%00', { headers: { api_key: messagingKey.body.apiKey } });
    assert.equal(lookup.status, 400, lookup.text);
    assert.equal(lookup.body.error_code, 'bad_request');
    // Authentication still comes first; on a signed endpoint, the signature.
    assert.equal((await call(lipa.url, 'DELETE', '/api/v1/api-keys/key%00x')).status, 401);
    const signed = await call(lipa.url, 'POST', '/api/public/v1/merchant-payments?x=%00', { body: {} });
    assert.equal(signed.status, 403, signed.text);
    assert.equal(signed.body.error.code, 'signature_missing_header');
    // An unknown path is an unknown endpoint, whatever it holds.
    const unknown = await call(lipa.url, 'GET', '/api/v1/nothing%00here', { headers: bearer });
    assert.equal(unknown.status, 404, unknown.text);
    assert.match(unknown.body.error.message, /^No endpoint/);
    assert.equal((await call(lipa.url, 'GET', '/api/messages/msg%00x', { headers: { api_key: 'nope' } })).status, 401);
  });

  test('__proto__ and constructor.prototype keys are refused', async () => {
    const proto = await call(lipa.url, 'POST', '/api/v1/authorization', {
      raw: '{"login":"a@b.c","password":"x","__proto__":{"admin":true}}',
    });
    assert.equal(proto.status, 422);
    assert.equal(proto.body.error.code, 'invalid_json');
    const ctor = await call(lipa.url, 'POST', '/api/v1/authorization', {
      raw: '{"login":"a@b.c","password":"x","constructor":{"prototype":{"admin":true}}}',
    });
    assert.equal(ctor.status, 422);
  });

  test('a body over 64 KiB answers 413', async () => {
    const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: 'a@b.c', password: 'x'.repeat(70 * 1024) } });
    assert.equal(reply.status, 413);
    assert.equal(reply.body.error.code, 'payload_too_large');
    assert.equal(reply.body.error.message, 'The request body is over 64 KiB, the most this API reads.');
  });

  test('a body that is not JSON answers 415', async () => {
    const reply = await call(lipa.url, 'POST', '/api/v1/authorization', {
      raw: 'login=a',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(reply.status, 415);
    assert.equal(reply.body.error.code, 'unsupported_media_type');
  });

  test('a body with a Content-Encoding other than identity answers 415, compressed or not; identity is fine', async () => {
    const { gzipSync } = await import('node:zlib');
    const plain = JSON.stringify({ login: 'nobody@example.com', password: 'wrong password' });
    for (const [coding, raw] of [
      ['gzip', plain],
      ['gzip', gzipSync(plain)],
      ['br', plain],
    ] as const) {
      const response = await checkedFetch(`${lipa.url}/api/v1/authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
        body: raw,
      });
      assert.equal(response.status, 415, coding);
      assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'unsupported_media_type');
    }
    const identity = await call(lipa.url, 'POST', '/api/v1/authorization', { raw: plain, headers: { 'content-encoding': 'identity' } });
    assert.equal(identity.status, 401, identity.text);
  });

  test('JSON in a charset other than UTF-8 answers 415; charset=utf-8 (any case, quoted or not) is fine', async () => {
    const body = JSON.stringify({ login: 'nobody@duka.example', password: 'wrong password' });
    const latin1 = await call(lipa.url, 'POST', '/api/v1/authorization', {
      raw: body,
      headers: { 'content-type': 'application/json; charset=latin1' },
    });
    assert.equal(latin1.status, 415, latin1.text);
    assert.equal(latin1.body.error.code, 'unsupported_media_type');
    // The answer names the charset, but not 10,000 characters of it.
    const long = await call(lipa.url, 'POST', '/api/v1/authorization', {
      raw: body,
      headers: { 'content-type': `application/json; charset=x${'y'.repeat(10_000)}` },
    });
    assert.equal(long.status, 415, long.text);
    assert.ok(long.body.error.message.includes('xyyy') && long.text.length < 400, long.text);
    for (const type of [
      'application/json; charset=utf-8',
      'application/json; charset=UTF-8',
      'application/json;charset="utf-8"',
      'application/json; charset=utf8',
      'application/json; charset=us-ascii',
    ]) {
      const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { raw: body, headers: { 'content-type': type } });
      assert.equal(reply.status, 401, `${type}: ${reply.text}`);
    }
  });

  test('wrong JSON types answer 422 with the field named', async () => {
    const reply = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: 42, password: 'x' } });
    assert.equal(reply.status, 422);
    assert.equal(reply.body.error.code, 'validation_failed');
    assert.deepEqual(reply.body.error.details[0].field, 'login');
  });

  test('every answer the tests get is checked against /openapi.json, and the check has teeth', async () => {
    const check = (status: number, body: unknown, method = 'GET', path = '/health') =>
      checkAgainstOpenApi(lipa.url, method, path, status, 'application/json; charset=utf-8', body);
    await check(200, { status: 'ok' });
    await assert.rejects(check(200, { status: 'ok', extra: 1 }), /undocumented members: body\.extra/);
    await assert.rejects(check(418, { status: 'ok' }), /status 418 not documented/);
    // A 500 is documented everywhere, yet a failure outside the messaging API's own tests.
    await assert.rejects(
      check(500, { error: { code: 'internal_error', message: 'x' }, requestId: 'r' }, 'GET', '/api/v1/points-of-sale'),
      /an internal error \(500\), which no test expects/,
    );
    // Inside an anyOf, members are judged by the alternative the body matches.
    await check(500, 'The recipient email address is invalid: x', 'POST', '/api/messages');
    await assert.rejects(
      check(500, { status: 'error', message: 'x', extra: 1 }, 'POST', '/api/messages'),
      /undocumented members: body\.extra/,
    );
    await assert.rejects(check(200, { status: 7 }), /body does not match/);
    await assert.rejects(check(200, { ok: true }, 'PATCH', '/health'), /no such operation documented/);
    await check(404, { message: 'No endpoint' }, 'GET', '/nothing-here');
    // HEAD is judged as its GET, without a body; dot segments as fetch resolves them.
    await check(200, null, 'HEAD', '/health');
    await assert.rejects(check(200, { status: 'ok', extra: 1 }, 'GET', '/api/v1/../../health'), /undocumented members/);
    // Through a $ref (the shared error body); a missing member; an empty body.
    await assert.rejects(
      check(503, { error: { code: 'x', message: 'y', hint: 1 }, requestId: 'r' }),
      /undocumented members: body\.error\.hint/,
    );
    await assert.rejects(check(200, { status: 'success', message: 'x' }, 'POST', '/api/messages'), /body does not match/);
    await assert.rejects(check(200, null), /no body where application\/json is documented/);
  });

  test('health, readiness, OpenAPI and docs answer', async () => {
    assert.deepEqual((await call(lipa.url, 'GET', '/health')).body, { status: 'ok' });
    assert.deepEqual((await call(lipa.url, 'GET', '/ready')).body, { status: 'ready' });
    const openapi = await call(lipa.url, 'GET', '/openapi.json');
    assert.equal(openapi.status, 200);
    assert.equal(openapi.body.openapi, '3.0.3');
    // Only OpenAPI 3.0 schema keywords: 3.1's (numeric exclusiveMinimum, const, …) break 3.0 tools.
    const keywords: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (node === null || typeof node !== 'object') return;
      for (const [key, value] of Object.entries(node)) {
        if (['exclusiveMinimum', 'exclusiveMaximum'].includes(key) && typeof value !== 'boolean') keywords.push(`${path}.${key}`);
        if (['const', 'prefixItems', '$defs', 'unevaluatedProperties'].includes(key) || (key === 'type' && Array.isArray(value)))
          keywords.push(`${path}.${key}`);
        walk(value, `${path}.${key}`);
      }
    };
    walk(openapi.body.paths, 'paths');
    assert.deepEqual(keywords, [], 'OpenAPI 3.1-only keywords in a 3.0.3 document');
    for (const path of [
      '/api/v1/authorization',
      '/api/v1/authorization/confirm',
      '/api/v1/points-of-sale',
      '/api/v1/api-keys',
      '/api/v1/admin/merchants',
    ]) {
      assert.ok(openapi.body.paths[path], `openapi documents ${path}`);
    }
    // The framework's answers to a body are listed too: 413, and 415 except on signed routes (422).
    const create = openapi.body.paths['/api/public/v1/merchant-payments'].post.responses;
    assert.ok(create['413'] && create['422'] && !create['415'], Object.keys(create).join());
    const login = openapi.body.paths['/api/v1/authorization'].post.responses;
    assert.ok(login['413'] && login['415'], Object.keys(login).join());
    // So on every route that reads a body, one that takes none included (a revocation, a decline).
    // The signed ones are every operation of /api/public/ (payments, refunds, balance, transactions).
    const signedPaths = Object.keys(openapi.body.paths).filter((path) => path.startsWith('/api/public/'));
    assert.ok(signedPaths.length >= 7, signedPaths.join());
    for (const [path, operations] of Object.entries(
      openapi.body.paths as Record<string, Record<string, { responses: object; security?: Record<string, unknown>[] }>>,
    )) {
      if (path.startsWith('/api/messages')) continue; // its own shapes: 400 for any bad body
      for (const [method, operation] of Object.entries(operations)) {
        if (!['post', 'put', 'patch', 'delete'].includes(method)) continue;
        const listed = Object.keys(operation.responses);
        const signed = operation.security?.some((scheme) => 'signedRequest' in scheme) ?? false;
        assert.equal(signed, path.startsWith('/api/public/'), `${path}: signed exactly when under /api/public/`);
        const expected = signed ? ['413', '422'] : ['413', '415', '422'];
        for (const status of expected)
          assert.ok(listed.includes(status), `${method.toUpperCase()} ${path} lists ${status}: ${listed.join()}`);
      }
    }
    // OpenAPI 3.0 requires at least one response per operation (/metrics has no JSON schema);
    // and the operator API lists the 429 its wrong-token limit answers.
    for (const [path, operations] of Object.entries(openapi.body.paths as Record<string, Record<string, { responses: object }>>)) {
      for (const [method, operation] of Object.entries(operations)) {
        const listed = Object.keys(operation.responses ?? {});
        assert.ok(listed.length > 0, `${method.toUpperCase()} ${path} lists no response`);
        if (path.startsWith('/api/v1/admin/'))
          assert.ok(listed.includes('429'), `${method.toUpperCase()} ${path} lists 429: ${listed.join()}`);
        // A failure of ours can answer any API request (the interface's 500 "internal error").
        if (path.startsWith('/api/')) assert.ok(listed.includes('500'), `${method.toUpperCase()} ${path} lists 500: ${listed.join()}`);
      }
    }
    assert.deepEqual(Object.keys(openapi.body.paths['/metrics'].get.responses['200'].content), ['text/plain; version=0.0.4']);
    // The payment's amount carries its bounds (OpenAPI 3.0's boolean exclusiveMinimum), which the handler enforces.
    const createBody = openapi.body.paths['/api/public/v1/merchant-payments'].post.requestBody.content['application/json'].schema;
    const { minimum, exclusiveMinimum, maximum, type } = createBody.properties.amount;
    assert.deepEqual({ type, minimum, exclusiveMinimum, maximum }, { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 250000 });
    assert.deepEqual(createBody.required.sort(), ['amount', 'currency', 'orderId', 'payer', 'terminalId', 'urls']);
    // And the forms the handler enforces, so that a client made from the description sends them.
    assert.deepEqual(createBody.properties.currency.enum, ['KES']);
    assert.equal(createBody.properties.merchantStika.pattern, '^[A-Z]{3}_[0-9]+$');
    assert.deepEqual(createBody.properties.payer.properties.method.enum, ['phone']);
    assert.equal(createBody.properties.payer.properties.value.pattern, '^[0-9]{8,15}$');
    assert.deepEqual(createBody.properties.payer.required.sort(), ['method', 'value']);
    const url = { format: 'uri', pattern: '^[hH][tT][tT][pP][sS]?://' };
    for (const name of ['callbackUrl', 'successRedirectUrl']) {
      const { format, pattern } = createBody.properties.urls.properties[name];
      assert.deepEqual({ format, pattern }, url, name);
    }
    const posBody = openapi.body.paths['/api/v1/points-of-sale'].post.requestBody.content['application/json'].schema;
    for (const name of ['website', 'resultUrl', 'serverUrl']) {
      const { format, pattern } = posBody.properties[name];
      assert.deepEqual({ format, pattern }, url, name);
    }
    // The messaging API's answers are described, though they are sent without response schemas.
    const messaging = openapi.body.paths['/api/messages'].post.responses;
    assert.deepEqual(Object.keys(messaging).sort(), ['200', '201', '400', '401', '429', '500']);
    assert.deepEqual(Object.keys(messaging['201'].content['application/json'].schema.properties).sort(), ['data', 'message']);
    const lookup = openapi.body.paths['/api/messages/{message_id}'].get.responses;
    assert.deepEqual(Object.keys(lookup).sort(), ['200', '400', '401', '403', '404', '429', '500']);
    const docs = await fetch(`${lipa.url}/docs/`);
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /swagger/i);
  });

  test('a path under /docs that names no file is 404, also with dot segments, a NUL or a long name', async () => {
    const paths = ['/docs/static/..', '/docs/static/%2e', '/docs/static/x%00y', `/docs/static/${'a'.repeat(5000)}`, '/docs/static/.env'];
    for (const path of [...paths, '/docs/static/nothing.js']) {
      // Written as it is: fetch would resolve the dot segments before sending.
      const answer = await sendBytes(lipa.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      assert.ok(head.startsWith('HTTP/1.1 404 '), `${path}: ${answer.slice(0, 300)}`);
      // The route takes GET: it found nothing to serve, so no Allow saying the method it was sent.
      assert.doesNotMatch(head, /\r\nAllow:/i, path);
      assert.deepEqual(JSON.parse(body).error, { code: 'not_found', message: 'Not found.' }, path);
    }
  });

  test('API answers are not cached and not sniffed', async () => {
    const reply = await call(lipa.url, 'GET', '/api/v1/categories');
    assert.equal(reply.headers.get('cache-control'), 'no-store');
    assert.equal(reply.headers.get('x-content-type-options'), 'nosniff');
  });
});

describe('authentication comes before the body', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('a bearer route without a token answers 401, whatever the body', async () => {
    for (const options of [{ body: {} }, { raw: '{bad' }, { raw: 'x', headers: { 'content-type': 'text/plain' } }]) {
      const reply = await call(lipa.url, 'POST', '/api/v1/points-of-sale', options);
      assert.equal(reply.status, 401, JSON.stringify(options));
      assert.equal(reply.body.error.code, 'unauthorized');
    }
    const adminReply = await call(lipa.url, 'POST', '/api/v1/admin/merchants', { raw: '{bad' });
    assert.equal(adminReply.status, 401);
    // However long a path parameter is, the route is reached: authentication comes first.
    for (const path of [`/api/v1/wallet/payments/${'p'.repeat(5000)}/accept`, `/api/v1/callbacks/${'e'.repeat(5000)}/redeliver`]) {
      const long = await call(lipa.url, 'POST', path, { body: { pin: '1234' } });
      assert.equal(long.status, 401, `${path.slice(0, 30)}…: ${long.text.slice(0, 200)}`);
      assert.equal(long.body.error.code, 'unauthorized');
    }
  });

  test('an over-long id in a path is just unknown once authenticated: 404, or 409 for a wallet payment', async () => {
    const merchant = await merchantSession(lipa);
    const long = 'k'.repeat(5000);
    for (const path of [`/api/v1/api-keys/${long}`, `/api/v1/messaging-keys/${long}`]) {
      const reply = await call(lipa.url, 'DELETE', path, { token: merchant.token });
      assert.equal(reply.status, 404, `${path.slice(0, 30)}…: ${reply.text.slice(0, 200)}`);
      assert.equal(reply.body.error.code, 'not_found');
    }
    const redeliver = await call(lipa.url, 'POST', `/api/v1/callbacks/${long}/redeliver`, { token: merchant.token });
    assert.equal(redeliver.status, 404, redeliver.text.slice(0, 200));
    const payer = await createPayer(lipa);
    const token = await payerToken(lipa, payer);
    for (const action of ['accept', 'decline']) {
      const reply = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${long}/${action}`, { token, body: { pin: payer.pin } });
      assert.equal(reply.status, 404, `${action}: ${reply.text.slice(0, 200)}`);
      assert.equal(reply.body.error.code, 'not_found');
    }
  });

  test('the messaging API answers a bad api_key with 401, whatever the body', async () => {
    const reply = await call(lipa.url, 'POST', '/api/messages', { raw: '{bad', headers: { api_key: 'wrong' } });
    assert.equal(reply.status, 401);
    assert.deepEqual(Object.keys(reply.body).sort(), ['error_code', 'message', 'status']);
    assert.equal(reply.body.error_code, 'unauthorized');
    const lookup = await call(lipa.url, 'GET', `/api/messages/${'x'.repeat(300)}`, { headers: { api_key: 'wrong' } });
    assert.equal(lookup.status, 401);
    assert.equal(lookup.body.message, 'Authentication failed');
  });

  test('a path that is not valid percent-encoding names no endpoint: 404 in the shape of the API asked', async () => {
    for (const path of ['/api/v1/wallet/payments/%E0%A4%A/accept', '/api/public/v1/merchant-payments/%zz', '/%']) {
      const reply = await call(lipa.url, 'POST', path, { body: {} });
      assert.equal(reply.status, 404, `${path}: ${reply.text}`);
      assert.equal(reply.body.error.code, 'not_found', path);
      assert.ok(reply.headers.get('x-request-id'), 'the request id is still set');
      // The headers of every answer, though no hook ran.
      assert.equal(reply.headers.get('x-content-type-options'), 'nosniff', path);
      assert.equal(reply.headers.get('referrer-policy'), 'no-referrer', path);
      assert.equal(reply.headers.get('cache-control'), path.startsWith('/api/') ? 'no-store' : null, path);
    }
    // Endpoint 8 authenticates first, whatever its id: no key or a wrong one is 401, a good one 404.
    for (const headers of [{}, { api_key: 'wrong' }] as Array<Record<string, string>>) {
      const refused = await call(lipa.url, 'GET', '/api/messages/%zz', { headers });
      assert.equal(refused.status, 401, refused.text);
      assert.equal(refused.body.message, 'Authentication failed');
    }
    const merchant = await merchantSession(lipa);
    const key = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: merchant.token, body: {} });
    const message = await call(lipa.url, 'GET', '/api/messages/%zz', { headers: { api_key: key.body.apiKey } });
    assert.equal(message.status, 404, message.text);
    assert.deepEqual(message.body, { message: 'Message not found.', error_code: 'not_found' });
    assert.equal(message.headers.get('cache-control'), 'no-store');
    assert.equal(message.headers.get('x-content-type-options'), 'nosniff');
    // Anything else under it is no endpoint, in the messaging shape.
    const post = await call(lipa.url, 'POST', '/api/messages/%zz', { body: {} });
    assert.deepEqual(post.body, {
      message: 'No endpoint POST /api/messages/%zz: the path is not valid percent-encoding.',
      error_code: 'not_found',
    });
  });

  test('parallel wrong passwords cannot get past the per-login limit', async () => {
    const login = `flood-${Date.now()}@shop.example`;
    const replies = await Promise.all(
      Array.from({ length: 25 }, () => call(lipa.url, 'POST', '/api/v1/authorization', { body: { login, password: 'wrong' } })),
    );
    const statuses = replies.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 401).length, 10, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 429).length, 15);
  });

  test('GET /metrics speaks the Prometheus text format', async () => {
    await call(lipa.url, 'GET', '/health');
    // The mock environment's listener (for load tests of the login path) counts too.
    const mocked = await call(lipa.mockUrl, 'POST', '/api/v1/authorization/confirm', { body: {} });
    assert.equal(mocked.status, 422, mocked.text);
    const reply = await call(lipa.url, 'GET', '/metrics');
    assert.equal(reply.status, 200);
    assert.match(reply.headers.get('content-type') ?? '', /^text\/plain/);
    const text = reply.text;
    assert.match(text, /# TYPE lipa_http_requests_total counter/);
    assert.match(text, /lipa_http_requests_total\{method="GET",route="\/health",status="200",listener="main"\} [1-9]/);
    assert.match(
      text,
      /lipa_http_requests_total\{method="POST",route="\/api\/v1\/authorization\/confirm",status="422",listener="mock"\} [1-9]/,
    );
    assert.match(text, /process_resident_memory_bytes [0-9]+/);
    for (const name of ['lipa_payment_status_changes_total', 'lipa_message_status_changes_total'])
      assert.match(text, new RegExp(`# TYPE ${name} counter`));
    for (const name of ['lipa_payments_open', 'lipa_messages_queued', 'lipa_callback_deliveries_pending'])
      assert.match(text, new RegExp(`# TYPE ${name} gauge`));
    // No SMSC configured: no binds to report.
    assert.doesNotMatch(text, /lipa_smpp_bound/);
  });

  test('/metrics counts only open work, each within an index: never a scan of every payment or message', async () => {
    // A count over every row blocked SQLite's event loop for 2.5 s a scrape with 2 million
    // payments. PostgreSQL is told to avoid scans, so a plan still scanning has no index to use.
    for (const [what, query] of Object.entries(OPEN_WORK)) {
      const { sql: text, parameters } = query(lipa.ctx.store.db).compile();
      const plan = await lipa.ctx.store.db.transaction().execute(async (tx) => {
        if (ON_POSTGRES) await sql`set local enable_seqscan = off`.execute(tx);
        const explained = await tx.executeQuery(
          CompiledQuery.raw(`${ON_POSTGRES ? 'explain' : 'explain query plan'} ${text}`, [...parameters]),
        );
        return explained.rows.map((row) => String(Object.values(row as object).at(-1))).join('\n');
      });
      assert.doesNotMatch(plan, ON_POSTGRES ? /Seq Scan/ : /^SCAN /m, `${what}:\n${plan}`);
      assert.match(plan, /INDEX|Index/, `${what}:\n${plan}`);
    }
  });
});
