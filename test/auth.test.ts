import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Payment, PaymentRequest } from '../src/client/index.js';
import { assertError } from './helpers/assertions.js';
import {
  admin,
  call,
  clientFor,
  createMerchant,
  createPayer,
  lastOtpSentTo,
  merchantSession,
  merchantWithPos,
  payerToken,
  paymentBody,
  type Reply,
  unique,
} from './helpers/client.js';
import { type Lipa, STAGING_OTP, startLipa } from './helpers/harness.js';
import { isPayerOperation, type OpenApiDocument, operationsOf, schemesOf } from './helpers/openapi-check.js';

const AUTH = '/api/v1/authorization';
const CONFIRM = '/api/v1/authorization/confirm';

interface OutboxEntry {
  id: string;
  type: string;
  purpose: string;
  to: string;
  subject: string | null;
  content: string;
}

function assertTokenReply(reply: Reply, expiresIn = 3600): void {
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(Object.keys(reply.body).sort(), ['expiresIn', 'token', 'tokenType']);
  assert.equal(typeof reply.body.token, 'string');
  assert.ok(reply.body.token.length >= 32);
  assert.equal(reply.body.tokenType, 'Bearer');
  assert.equal(reply.body.expiresIn, expiresIn);
}

function assertRateLimited(reply: Reply): void {
  assertError(reply, 429, 'rate_limited');
  const retryAfter = reply.headers.get('retry-after');
  assert.match(retryAfter ?? '', /^[0-9]+$/);
  assert.ok(Number(retryAfter) > 0);
}

const startLogin = (lipa: Lipa, login: string, password: string) => call(lipa.url, 'POST', AUTH, { body: { login, password } });
const confirm = (lipa: Lipa, login: string, otp: string) => call(lipa.url, 'POST', CONFIRM, { body: { login, otp } });

async function outbox(lipa: Lipa): Promise<OutboxEntry[]> {
  const reply = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
  assert.equal(reply.status, 200, reply.text);
  return reply.body.data;
}

/**
 * Calls endpoint 1 with the right credentials, asserts its answer, and returns the one OTP
 * message that the call added to the outbox for `to` (found by id, not by time order).
 */
async function loginForOtp(lipa: Lipa, login: string, password: string, to: string): Promise<{ otp: string; message: OutboxEntry }> {
  const seen = new Set((await outbox(lipa)).map((m) => m.id));
  const reply = await startLogin(lipa, login, password);
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(reply.body, { status: 'otp_sent', expiresIn: 300 });
  const added = (await outbox(lipa)).filter((m) => !seen.has(m.id) && m.to === to && m.purpose === 'otp');
  assert.equal(added.length, 1, `one OTP message to ${to}`);
  const message = added[0] as OutboxEntry;
  if (lipa.ctx.config.env === 'production') {
    // No operator may read a login code in production: the outbox hides it; the recipient's
    // copy (the stored message, sealed) has it.
    assert.match(message.content, /\*{6}/, message.content);
    assert.doesNotMatch(message.content, /[0-9]{6}/, message.content);
    return { otp: await lastOtpSentTo(lipa, to), message };
  }
  const otp = message.content.match(/\b([0-9]{6})\b/)?.[1];
  assert.ok(otp, `an OTP in: ${message.content}`);
  return { otp, message };
}

/** Six-digit codes that are neither the real OTP nor the staging OTP. */
function wrongOtps(real: string, count: number): string[] {
  const out: string[] = [];
  for (let i = 1; out.length < count; i++) {
    const candidate = String((Number(real) + i) % 1_000_000).padStart(6, '0');
    if (candidate !== STAGING_OTP && candidate !== real) out.push(candidate);
  }
  return out;
}

function wrongOtp(real: string): string {
  return wrongOtps(real, 1)[0] as string;
}

const withoutRequestId = (body: { requestId?: string }) => ({ ...body, requestId: undefined });

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

async function timed(fn: () => Promise<Reply>): Promise<{ reply: Reply; ms: number }> {
  const started = performance.now();
  const reply = await fn();
  return { reply, ms: performance.now() - started };
}

describe('Sessions: endpoints 1 and 2 (staging)', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('a merchant logs in: OTP by email to the login, confirm gives a bearer token that works', async () => {
    const merchant = await createMerchant(lipa);
    const { otp, message } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assert.equal(message.type, 'email');
    assert.match(otp, /^[0-9]{6}$/);
    const confirmed = await confirm(lipa, merchant.login, otp);
    assertTokenReply(confirmed);
    const list = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body, []);
  });

  test('merchant logins are case-insensitive at login and at confirm', async () => {
    const merchant = await createMerchant(lipa);
    const shouted = merchant.login.toUpperCase();
    assert.notEqual(shouted, merchant.login);
    const { otp } = await loginForOtp(lipa, shouted, merchant.password, merchant.login);
    const confirmed = await confirm(lipa, shouted, otp);
    assertTokenReply(confirmed);
    const list = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token });
    assert.equal(list.status, 200, list.text);
  });

  test('a payer logs in with phone and PIN: OTP by SMS to the phone, confirm gives a token', async () => {
    const payer = await createPayer(lipa);
    const { otp, message } = await loginForOtp(lipa, payer.phone, payer.pin, payer.phone);
    assert.equal(message.type, 'sms');
    assert.equal(message.to, payer.phone);
    assertTokenReply(await confirm(lipa, payer.phone, otp));
  });

  test('unknown login and wrong password: same 401 body and about the same time', async () => {
    const merchant = await createMerchant(lipa);
    const unknownLogin = `${unique('nobody')}@shop.example`;
    const unknown: number[] = [];
    const wrong: number[] = [];
    let unknownReply: Reply | undefined;
    let wrongReply: Reply | undefined;
    for (let i = 0; i < 3; i++) {
      const u = await timed(() => startLogin(lipa, unknownLogin, merchant.password));
      const w = await timed(() => startLogin(lipa, merchant.login, `${merchant.password}!`));
      assertError(u.reply, 401, 'invalid_credentials');
      assertError(w.reply, 401, 'invalid_credentials');
      unknown.push(u.ms);
      wrong.push(w.ms);
      unknownReply = u.reply;
      wrongReply = w.reply;
    }
    assert.ok(unknownReply && wrongReply);
    assert.deepEqual(Object.keys(unknownReply.body).sort(), ['error', 'requestId']);
    assert.deepEqual(withoutRequestId(unknownReply.body), withoutRequestId(wrongReply.body));
    assert.notEqual(unknownReply.body.requestId, wrongReply.body.requestId);
    const ratio = median(unknown) / median(wrong);
    assert.ok(ratio > 0.25 && ratio < 4, `unknown ${unknown.map(Math.round)} ms vs wrong ${wrong.map(Math.round)} ms`);
  });

  test('a payer with a wrong PIN gets the same 401 as an unknown phone, in about the same time', async () => {
    const payer = await createPayer(lipa);
    const unknownPhone = `2547${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`;
    assert.notEqual(unknownPhone, payer.phone);
    const wrongPin = payer.pin === '0000' ? '1111' : '0000';
    const unknown: number[] = [];
    const wrong: number[] = [];
    let unknownReply: Reply | undefined;
    let wrongReply: Reply | undefined;
    for (let i = 0; i < 3; i++) {
      const u = await timed(() => startLogin(lipa, unknownPhone, payer.pin));
      const w = await timed(() => startLogin(lipa, payer.phone, wrongPin));
      assertError(u.reply, 401, 'invalid_credentials');
      assertError(w.reply, 401, 'invalid_credentials');
      unknown.push(u.ms);
      wrong.push(w.ms);
      unknownReply = u.reply;
      wrongReply = w.reply;
    }
    assert.ok(unknownReply && wrongReply);
    assert.deepEqual(withoutRequestId(unknownReply.body), withoutRequestId(wrongReply.body));
    const ratio = median(unknown) / median(wrong);
    assert.ok(ratio > 0.25 && ratio < 4, `unknown ${unknown.map(Math.round)} ms vs wrong ${wrong.map(Math.round)} ms`);
  });

  test('an OTP is single-use: the second confirm with it is 401 invalid_otp', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assertTokenReply(await confirm(lipa, merchant.login, otp));
    assertError(await confirm(lipa, merchant.login, otp), 401, 'invalid_otp');
  });

  test('a wrong OTP is 401 and the right one still works afterwards', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assertError(await confirm(lipa, merchant.login, wrongOtp(otp)), 401, 'invalid_otp');
    assertTokenReply(await confirm(lipa, merchant.login, otp));
  });

  test('after 5 wrong OTPs the right one is refused too', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    const said: string[] = [];
    for (const wrong of wrongOtps(otp, 5)) {
      const reply = await confirm(lipa, merchant.login, wrong);
      assertError(reply, 401, 'invalid_otp');
      said.push(reply.body.error.message);
    }
    // One answer for every try, the same as for a login with no code at all: nothing says
    // to a stranger that this login exists and has a code waiting.
    const none = await confirm(lipa, `${unique('nobody')}@duka.example`, '123456');
    assert.deepEqual(new Set(said), new Set([none.body.error.message]));
    assert.match(none.body.error.message, /at most 5 wrong tries/);
    assertError(await confirm(lipa, merchant.login, otp), 401, 'invalid_otp');
    // The staging OTP does not revive a dead challenge either.
    assertError(await confirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
  });

  test('guesses sent at once take no more than the 5 tries a code has', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    const replies = await Promise.all(wrongOtps(otp, 8).map((wrong) => confirm(lipa, merchant.login, wrong)));
    for (const reply of replies) assertError(reply, 401, 'invalid_otp');
    const challenge = await lipa.ctx.store.db
      .selectFrom('otp_challenges')
      .select('attempts')
      .where('login', '=', merchant.login)
      .executeTakeFirstOrThrow();
    assert.equal(challenge.attempts, 5, 'eight guesses, five tries counted: the rest were refused untried');
    assertError(await confirm(lipa, merchant.login, otp), 401, 'invalid_otp');
  });

  test('a new login issues a new OTP and the older one stops working', async () => {
    const merchant = await createMerchant(lipa);
    const first = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    let second = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    if (second.otp === first.otp) second = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assert.notEqual(second.otp, first.otp);
    assertError(await confirm(lipa, merchant.login, first.otp), 401, 'invalid_otp');
    assertTokenReply(await confirm(lipa, merchant.login, second.otp));
  });

  test('confirm without any prior login is 401', async () => {
    const merchant = await createMerchant(lipa);
    assertError(await confirm(lipa, merchant.login, '123456'), 401, 'invalid_otp');
    const payer = await createPayer(lipa);
    assertError(await confirm(lipa, payer.phone, '123456'), 401, 'invalid_otp');
  });

  test('the staging OTP works after a successful login, not without one', async () => {
    const merchant = await createMerchant(lipa);
    assertError(await confirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
    // A failed login opens nothing either.
    assertError(await startLogin(lipa, merchant.login, 'not the password'), 401, 'invalid_credentials');
    assertError(await confirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
    await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    const confirmed = await confirm(lipa, merchant.login, STAGING_OTP);
    assertTokenReply(confirmed);
    assert.equal((await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token })).status, 200);
    // ... and is single-use like the real one.
    assertError(await confirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
  });

  test('two concurrent confirms with the same OTP: exactly one succeeds (5 rounds)', async () => {
    const merchant = await createMerchant(lipa);
    for (let round = 0; round < 5; round++) {
      const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
      const replies = await Promise.all([confirm(lipa, merchant.login, otp), confirm(lipa, merchant.login, otp)]);
      const ok = replies.filter((r) => r.status === 200);
      const refused = replies.filter((r) => r.status !== 200);
      assert.equal(ok.length, 1, `round ${round}: ${replies.map((r) => `${r.status} ${r.text}`).join('\n')}`);
      assertTokenReply(ok[0] as Reply);
      assertError(refused[0] as Reply, 401, 'invalid_otp');
    }
  });

  test('a used code sent again (a form sent twice, a retry) is refused but not counted towards the lockout', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    const replies = await Promise.all(Array.from({ length: 20 }, () => confirm(lipa, merchant.login, otp)));
    assert.equal(replies.filter((r) => r.status === 200).length, 1);
    for (let i = 0; i < 12; i++) assertError(await confirm(lipa, merchant.login, otp), 401, 'invalid_otp');
    // More repeats than RATE_LIMIT_LOGIN_FAILURES (10), and the merchant can still log in.
    const { otp: next } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assertTokenReply(await confirm(lipa, merchant.login, next));
    // A wrong code is still a guess, however soon after a success.
    for (const wrong of wrongOtps(next, 10)) assertError(await confirm(lipa, merchant.login, wrong), 401, 'invalid_otp');
    assertRateLimited(await startLogin(lipa, merchant.login, merchant.password));
  });

  test('logging out ends that token at once and no other: a copy of it is 401 after', async () => {
    const merchant = await createMerchant(lipa);
    const tokens: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
      tokens.push((await confirm(lipa, merchant.login, otp)).body.token);
    }
    const [first, second] = tokens as [string, string];
    const out = await call(lipa.url, 'DELETE', '/api/v1/authorization', { token: first });
    assert.equal(out.status, 204, out.text);
    assert.equal(out.text, '');
    assertError(await call(lipa.url, 'GET', '/api/v1/me', { token: first }), 401, 'unauthorized');
    assertError(await call(lipa.url, 'POST', '/api/v1/api-keys', { token: first, body: {} }), 401, 'unauthorized');
    assertError(await call(lipa.url, 'DELETE', '/api/v1/authorization', { token: first }), 401, 'unauthorized');
    assert.equal((await call(lipa.url, 'GET', '/api/v1/me', { token: second })).status, 200, 'the other device stays signed in');
    assertError(await call(lipa.url, 'DELETE', '/api/v1/authorization'), 401, 'unauthorized');

    const payer = await createPayer(lipa);
    const { otp } = await loginForOtp(lipa, payer.phone, payer.pin, payer.phone);
    const wallet = (await confirm(lipa, payer.phone, otp)).body.token;
    assert.equal((await call(lipa.url, 'DELETE', '/api/v1/authorization', { token: wallet })).status, 204);
    assertError(await call(lipa.url, 'GET', '/api/v1/wallet', { token: wallet }), 401, 'unauthorized');
  });

  test('every bearer operation in /openapi.json answers 401 without a token; all but two belong to one kind of session and answer 403 to the other', async () => {
    const spec = (await call(lipa.url, 'GET', '/openapi.json')).body as OpenApiDocument;
    const merchantToken = (await merchantSession(lipa)).token;
    const wallet = await payerToken(lipa, await createPayer(lipa));
    const checked: string[] = [];
    const eitherKind: string[] = [];
    for (const [method, template, operation] of operationsOf(spec)) {
      if (!schemesOf(operation).includes('bearerAuth')) continue;
      const path = template.replace(/\{[^}]+\}/g, 'x');
      const body = method === 'get' || method === 'delete' ? undefined : {};
      const none = await call(lipa.url, method.toUpperCase(), path, { body });
      assertError(none, 401, 'unauthorized');
      assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/, `${method} ${template}`);
      checked.push(`${method} ${template}`);
      if (!(operation.responses as Record<string, unknown>)['403']) {
        eitherKind.push(`${method} ${template}`);
        continue;
      }
      const other = isPayerOperation(template) ? merchantToken : wallet;
      assertError(await call(lipa.url, method.toUpperCase(), path, { body, token: other }), 403, 'forbidden');
    }
    assert.ok(checked.length >= 15, `bearer operations checked: ${checked.join(', ')}`);
    // Only these take either kind of session; any other operation without a 403 is a guard missing.
    assert.deepEqual(eitherKind.sort(), ['delete /api/v1/authorization', 'get /api/v1/me']);
  });

  test('bearer tokens: none, garbage and wrong kind', async () => {
    const none = await call(lipa.url, 'GET', '/api/v1/points-of-sale');
    assertError(none, 401, 'unauthorized');
    assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/);
    const garbage = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: 'lipa_mt_not-a-real-token' });
    assertError(garbage, 401, 'unauthorized');
    assert.match(garbage.headers.get('www-authenticate') ?? '', /^Bearer/);
    const notBearer = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
    assertError(notBearer, 401, 'unauthorized');

    const payer = await createPayer(lipa);
    const { otp } = await loginForOtp(lipa, payer.phone, payer.pin, payer.phone);
    const confirmed = await confirm(lipa, payer.phone, otp);
    assertTokenReply(confirmed);
    const forbidden = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token });
    assertError(forbidden, 403, 'forbidden');
  });

  test('validation: missing or mistyped fields are 422 naming the field', async () => {
    const cases: Array<{ path: string; body: unknown; field: string }> = [
      { path: AUTH, body: { password: 'x' }, field: 'login' },
      { path: AUTH, body: { login: 'a@b.example' }, field: 'password' },
      { path: AUTH, body: { login: 'a@b.example', password: 1234 }, field: 'password' },
      { path: AUTH, body: { login: ['a@b.example'], password: 'x' }, field: 'login' },
      { path: CONFIRM, body: { login: 'a@b.example' }, field: 'otp' },
      { path: CONFIRM, body: { otp: '123456' }, field: 'login' },
      { path: CONFIRM, body: { login: 'a@b.example', otp: 534789 }, field: 'otp' },
      { path: CONFIRM, body: { login: null, otp: '123456' }, field: 'login' },
    ];
    for (const { path, body, field } of cases) {
      const reply = await call(lipa.url, 'POST', path, { body });
      const label = `${path} ${JSON.stringify(body)}`;
      assert.equal(reply.status, 422, label);
      assertError(reply, 422, 'validation_failed');
      assert.ok(Array.isArray(reply.body.error.details), label);
      assert.ok(
        reply.body.error.details.some((d: { field: string; message: string }) => d.field === field && typeof d.message === 'string'),
        `${label}: ${reply.text}`,
      );
    }
  });

  test('login flood: 10 wrong passwords, then 429 with Retry-After even with the right password', async () => {
    const merchant = await createMerchant(lipa);
    for (let i = 0; i < 10; i++) {
      assertError(await startLogin(lipa, merchant.login, `wrong-${i}`), 401, 'invalid_credentials');
    }
    assertRateLimited(await startLogin(lipa, merchant.login, merchant.password));
    assertRateLimited(await confirm(lipa, merchant.login, STAGING_OTP));
    // The same login in other letter case is the same login.
    assertRateLimited(await startLogin(lipa, merchant.login.toUpperCase(), merchant.password));

    // Another login is not throttled by those failures.
    const other = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, other.login, other.password, other.login);
    assertTokenReply(await confirm(lipa, other.login, otp));
  });

  test('login flood: wrong OTPs count too', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    for (const wrong of wrongOtps(otp, 10)) {
      assertError(await confirm(lipa, merchant.login, wrong), 401, 'invalid_otp');
    }
    assertRateLimited(await startLogin(lipa, merchant.login, merchant.password));
    assertRateLimited(await confirm(lipa, merchant.login, otp));
  });

  test('login flood: a payer is throttled the same way', async () => {
    const payer = await createPayer(lipa);
    const wrongPin = payer.pin === '9999' ? '8888' : '9999';
    for (let i = 0; i < 10; i++) {
      assertError(await startLogin(lipa, payer.phone, wrongPin), 401, 'invalid_credentials');
    }
    assertRateLimited(await startLogin(lipa, payer.phone, payer.pin));
  });
});

describe('Sign-ins under a flood from many addresses', () => {
  let lipa: Lipa;

  before(async () => {
    // As if the flood came from many addresses: the per-address limit does not stop it here.
    lipa = await startLipa({ RATE_LIMIT_AUTH_IP_PER_MIN: '1000000', RATE_LIMIT_KEY_PER_SEC: '100000' });
  });
  after(() => lipa.close());

  test('checks beyond a short line are refused at once with 503 busy and Retry-After, uncounted; approvals have their own line', async () => {
    // A payment waiting for its payer, to approve in the middle of the flood.
    const shop = await merchantWithPos(lipa);
    const payer = await createPayer(lipa, { balance: 100 });
    const payerSession = await payerToken(lipa, payer);
    const created = await clientFor(lipa.url, shop).createPayment(
      paymentBody(shop, { amount: 5, payer: { method: 'phone', value: payer.phone } }) as PaymentRequest,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const paymentId = (created.body as Payment).paymentIdentifier;

    // Each an scrypt (unknown logins too), far more at once than the line holds.
    const logins = Array.from({ length: 150 }, () => `${unique('flood')}@nowhere.example`);
    const flood = logins.map((login) => startLogin(lipa, login, 'not-the-password'));
    const approval = call(lipa.url, 'POST', `/api/v1/wallet/payments/${paymentId}/accept`, {
      token: payerSession,
      body: { pin: payer.pin },
    });
    const replies = await Promise.all(flood);
    const busy = replies.filter((r) => r.status === 503);
    for (const reply of busy) {
      assertError(reply, 503, 'busy');
      assert.equal(reply.headers.get('retry-after'), '1');
    }
    const judged = replies.filter((r) => r.status !== 503);
    for (const reply of judged) assertError(reply, 401, 'invalid_credentials');
    assert.ok(busy.length > 0, 'the line is short: most of the flood is refused at once');
    assert.ok(judged.length > 0, 'the line still serves');
    const approved = await approval;
    assert.equal(approved.status, 200, `an approval is not held up by sign-ins: ${approved.text}`);
    assert.deepEqual(approved.body, { status: 'paid' });

    // A refused try judged nothing, so it does not count towards its login's lockout.
    const counted = await lipa.ctx.store.db
      .selectFrom('auth_throttle')
      .select('key')
      .where(
        'key',
        'in',
        logins.map((login) => `login:${login}`),
      )
      .where('count', '>', 0)
      .execute();
    assert.equal(counted.length, judged.length, 'only the judged tries are counted');

    // Once the flood has passed, signing in works.
    const merchant = await createMerchant(lipa);
    assert.equal((await startLogin(lipa, merchant.login, merchant.password)).status, 200);
  });

  test("one payer's approvals sent by the dozen take turns and hold one place in line: another payer is not turned away", async () => {
    const shop = await merchantWithPos(lipa);
    const [eager, other] = [await createPayer(lipa, { balance: 100 }), await createPayer(lipa, { balance: 100 })];
    const eagerSession = await payerToken(lipa, eager);
    const otherSession = await payerToken(lipa, other);
    const created = await clientFor(lipa.url, shop).createPayment(
      paymentBody(shop, { amount: 5, payer: { method: 'phone', value: other.phone } }) as PaymentRequest,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    // More at once than the approval line holds, each a PIN check (then 404: no such payment).
    const burst = Array.from({ length: 70 }, () =>
      call(lipa.url, 'POST', '/api/v1/wallet/payments/pay_000000000000000000000000/accept', {
        token: eagerSession,
        body: { pin: eager.pin },
      }),
    );
    await new Promise((r) => setTimeout(r, 200));
    const approved = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${(created.body as Payment).paymentIdentifier}/accept`, {
      token: otherSession,
      body: { pin: other.pin },
    });
    assert.equal(approved.status, 200, approved.text);
    for (const reply of await Promise.all(burst)) assertError(reply, 404, 'not_found');
  });
});

describe('Sessions in production', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ LIPA_ENV: 'production', LIPA_MASTER_KEY: 'a1'.repeat(32), MOCK_PORT: '0' });
  });
  after(() => lipa.close());

  test('every answer tells browsers to use https only (HSTS); staging answers do not', async () => {
    for (const path of ['/health', '/wallet', '/api/v1/categories']) {
      const reply = await call(lipa.url, 'GET', path);
      assert.equal(reply.headers.get('strict-transport-security'), 'max-age=31536000', path);
    }
    const staging = await startLipa();
    try {
      assert.equal((await call(staging.url, 'GET', '/health')).headers.get('strict-transport-security'), null);
    } finally {
      await staging.close();
    }
  });

  test('the staging OTP is refused; the OTP really sent works', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assert.notEqual(otp, STAGING_OTP);
    assertError(await confirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
    const confirmed = await confirm(lipa, merchant.login, otp);
    assertTokenReply(confirmed);
    assert.equal((await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token })).status, 200);
  });

  test('no login code is stored in the clear: the database holds it sealed', async () => {
    const merchant = await createMerchant(lipa);
    const payer = await createPayer(lipa);
    const codes = [
      (await loginForOtp(lipa, merchant.login, merchant.password, merchant.login)).otp,
      (await loginForOtp(lipa, payer.phone, payer.pin, payer.phone)).otp,
    ];
    const rows = await lipa.ctx.store.db.selectFrom('messages').select(['id', 'content']).where('purpose', '=', 'otp').execute();
    assert.ok(rows.length >= 2);
    for (const row of rows) {
      assert.match(row.content, /^v1\./, row.content);
      assert.doesNotMatch(row.content, /verification code/, row.content);
    }
    if (lipa.databaseUrl.startsWith('file:')) {
      // Nor anywhere in the files: the database and its write-ahead log.
      const path = lipa.databaseUrl.slice('file:'.length);
      const bytes = Buffer.concat([readFileSync(path), readFileSync(`${path}-wal`)]);
      for (const code of codes) assert.equal(bytes.includes(`code is ${code}`), false, code);
    }
  });

  test('the staging OTP is refused for a payer too', async () => {
    const payer = await createPayer(lipa);
    const { otp } = await loginForOtp(lipa, payer.phone, payer.pin, payer.phone);
    assertError(await confirm(lipa, payer.phone, STAGING_OTP), 401, 'invalid_otp');
    assertTokenReply(await confirm(lipa, payer.phone, otp));
  });
});

describe('Session expiry', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ TOKEN_TTL_SECONDS: '1' });
  });
  after(() => lipa.close());

  test('an expired token is 401 unauthorized with WWW-Authenticate', async () => {
    const merchant = await createMerchant(lipa);
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    const confirmed = await confirm(lipa, merchant.login, otp);
    assertTokenReply(confirmed, 1);
    const token: string = confirmed.body.token;
    assert.equal((await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token })).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const expired = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token });
    assertError(expired, 401, 'unauthorized');
    assert.match(expired.headers.get('www-authenticate') ?? '', /^Bearer/);
  });
});

describe('Per-IP limit on endpoints 1 to 3', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ RATE_LIMIT_AUTH_IP_PER_MIN: '5' });
  });
  after(() => lipa.close());

  test('the 6th request in a minute is 429 with Retry-After; other endpoints are not limited', async () => {
    const merchant = await createMerchant(lipa);
    const payer = await createPayer(lipa);
    // Five requests across both endpoints and two logins, all admitted.
    const { otp } = await loginForOtp(lipa, merchant.login, merchant.password, merchant.login);
    assertTokenReply(await confirm(lipa, merchant.login, otp));
    assertError(await startLogin(lipa, payer.phone, payer.pin === '0000' ? '1111' : '0000'), 401, 'invalid_credentials');
    assert.equal((await startLogin(lipa, payer.phone, payer.pin)).status, 200);
    assertTokenReply(await confirm(lipa, payer.phone, STAGING_OTP));

    const limited = await startLogin(lipa, merchant.login, merchant.password);
    assertRateLimited(limited);
    assert.ok(Number(limited.headers.get('retry-after')) <= 60);
    assertRateLimited(await confirm(lipa, payer.phone, STAGING_OTP));
    // Endpoint 3 (the mock listener's confirm) shares the count: one IP, one limit.
    const mock = await call(lipa.mockUrl, 'POST', '/api/v1/authorization/confirm', { body: { login: payer.phone, otp: STAGING_OTP } });
    assertRateLimited(mock);

    for (let i = 0; i < 8; i++) {
      const categories = await call(lipa.url, 'GET', '/api/v1/categories');
      assert.equal(categories.status, 200, categories.text);
      assert.ok(Array.isArray(categories.body));
    }
  });
  test('an IPv6 client is counted by its /64, an IPv4 client by its address', async () => {
    const proxied = await startLipa({ RATE_LIMIT_AUTH_IP_PER_MIN: '2', TRUST_PROXY: '127.0.0.1' });
    try {
      const from = (client: string) =>
        call(proxied.url, 'POST', AUTH, { body: { login: 'nobody@example.com', password: 'x' }, headers: { 'x-forwarded-for': client } });
      assertError(await from('2001:db8:1:2::a'), 401, 'invalid_credentials');
      assertError(await from('2001:db8:1:2:ffff::b'), 401, 'invalid_credentials');
      assertRateLimited(await from('2001:db8:1:2::c'));
      assertError(await from('2001:db8:1:3::a'), 401, 'invalid_credentials');
      assertError(await from('10.0.0.1'), 401, 'invalid_credentials');
      assertError(await from('10.0.0.1'), 401, 'invalid_credentials');
      assertRateLimited(await from('::ffff:10.0.0.1'));
      assertError(await from('10.0.0.2'), 401, 'invalid_credentials');
    } finally {
      await proxied.close();
    }
  });
});
