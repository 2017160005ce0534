import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from './helpers/assertions.js';
import { admin, call, createMerchant, createPayer, payerToken, type Reply, uniquePhone } from './helpers/client.js';
import { ADMIN_TOKEN, type Lipa, STAGING_OTP, startLipa } from './helpers/harness.js';

const AUTH = '/api/v1/authorization';
const CONFIRM = '/api/v1/authorization/confirm';

/** The answer of endpoint 2, which endpoint 3 must match. */
function assertTokenReply(reply: Reply): void {
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(Object.keys(reply.body).sort(), ['expiresIn', 'token', 'tokenType']);
  assert.equal(typeof reply.body.token, 'string');
  assert.ok(reply.body.token.length >= 32);
  assert.equal(reply.body.tokenType, 'Bearer');
  assert.equal(reply.body.expiresIn, 3600);
}

/** The ids of everything in the embedded outbox (read on the main listener). */
async function outboxIds(lipa: Lipa): Promise<string[]> {
  const reply = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
  assert.equal(reply.status, 200, reply.text);
  return (reply.body.data as Array<{ id: string }>).map((m) => m.id).sort();
}

const mockConfirm = (lipa: Lipa, login: string, otp: string) => call(lipa.mockUrl, 'POST', CONFIRM, { body: { login, otp } });
const mockLogin = (lipa: Lipa, login: string, password: string) => call(lipa.mockUrl, 'POST', AUTH, { body: { login, password } });

describe('Mock environment (endpoint 3)', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('a registered payer confirms with the static OTP without endpoint 1; nothing is sent', async () => {
    const payer = await createPayer(lipa);
    const before = await outboxIds(lipa);
    const first = await mockConfirm(lipa, payer.phone, STAGING_OTP);
    assertTokenReply(first);
    // Load tests log the same payer in again and again.
    const second = await mockConfirm(lipa, payer.phone, STAGING_OTP);
    assertTokenReply(second);
    assert.notEqual(second.body.token, first.body.token);
    assert.deepEqual(await outboxIds(lipa), before);
  });

  test('endpoint 1 on the mock checks the PIN and sends nothing; confirm works after it', async () => {
    const payer = await createPayer(lipa);
    const before = await outboxIds(lipa);
    const started = await mockLogin(lipa, payer.phone, payer.pin);
    assert.equal(started.status, 200, started.text);
    assert.deepEqual(started.body, { status: 'otp_sent', expiresIn: 300 });
    assertError(await mockLogin(lipa, payer.phone, payer.pin === '0000' ? '1111' : '0000'), 401, 'invalid_credentials');
    assertTokenReply(await mockConfirm(lipa, payer.phone, STAGING_OTP));
    assert.deepEqual(await outboxIds(lipa), before);
  });

  test('a wrong OTP, an unregistered phone and a merchant are refused with 401', async () => {
    const payer = await createPayer(lipa);
    const wrong = '123456';
    assertError(await mockConfirm(lipa, payer.phone, wrong), 401, 'invalid_otp');

    let stranger = uniquePhone();
    while (stranger === payer.phone) stranger = uniquePhone();
    assertError(await mockConfirm(lipa, stranger, STAGING_OTP), 401, 'invalid_otp');
    assertError(await mockLogin(lipa, stranger, '1234'), 401, 'invalid_credentials');

    const merchant = await createMerchant(lipa);
    assertError(await mockConfirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
    assertError(await mockLogin(lipa, merchant.login, merchant.password), 401, 'invalid_credentials');
    // Even right after a real login of that merchant on the main listener.
    assert.equal((await call(lipa.url, 'POST', AUTH, { body: { login: merchant.login, password: merchant.password } })).status, 200);
    assertError(await mockConfirm(lipa, merchant.login, STAGING_OTP), 401, 'invalid_otp');
  });

  test("wrong codes on the mock's endpoint 2 lock only the mock's endpoint 2; wrong PINs on its endpoint 1 count for the main listener too", async () => {
    const limit = lipa.ctx.config.rateLimitLoginFailures;
    const guessed = await createPayer(lipa);
    for (let i = 0; i < limit; i++) assertError(await mockConfirm(lipa, guessed.phone, '000000'), 401, 'invalid_otp');
    assertError(await mockConfirm(lipa, guessed.phone, STAGING_OTP), 429, 'rate_limited');
    // The static code guesses nothing: the payer still signs in on the main listener.
    assert.equal(typeof (await payerToken(lipa, guessed)), 'string');

    // The mock's endpoint 1 checks the real PIN: each wrong one is a real guess, counted for it.
    const pinGuessed = await createPayer(lipa);
    const wrongPin = pinGuessed.pin === '0000' ? '1111' : '0000';
    for (let i = 0; i < limit; i++) assertError(await mockLogin(lipa, pinGuessed.phone, wrongPin), 401, 'invalid_credentials');
    const main = await call(lipa.url, 'POST', AUTH, { body: { login: pinGuessed.phone, password: pinGuessed.pin } });
    assertError(main, 429, 'rate_limited');
  });

  test('missing or mistyped fields are 422 naming the field', async () => {
    const cases: Array<{ path: string; body: unknown; field: string }> = [
      { path: CONFIRM, body: { login: '254700000000' }, field: 'otp' },
      { path: CONFIRM, body: { login: '254700000000', otp: 534789 }, field: 'otp' },
      { path: AUTH, body: { login: '254700000000' }, field: 'password' },
    ];
    for (const { path, body, field } of cases) {
      const reply = await call(lipa.mockUrl, 'POST', path, { body });
      assertError(reply, 422, 'validation_failed');
      assert.ok(
        reply.body.error.details.some((d: { field: string }) => d.field === field),
        `${path} ${JSON.stringify(body)}: ${reply.text}`,
      );
    }
  });

  test('a mock token is refused by the main listener (401, while a main payer token gets 403)', async () => {
    const payer = await createPayer(lipa);
    const confirmed = await mockConfirm(lipa, payer.phone, STAGING_OTP);
    assertTokenReply(confirmed);
    const refused = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: confirmed.body.token });
    assertError(refused, 401, 'unauthorized');
    assert.match(refused.headers.get('www-authenticate') ?? '', /^Bearer/);

    const mainToken = await payerToken(lipa, payer);
    assertError(await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token: mainToken }), 403, 'forbidden');
  });

  test('the mock listener serves endpoints 1 and 2 only', async () => {
    const payer = await createPayer(lipa);
    const token = (await mockConfirm(lipa, payer.phone, STAGING_OTP)).body.token as string;
    const probes: Array<{ method: string; path: string; body?: unknown; token?: string }> = [
      { method: 'GET', path: '/health' },
      { method: 'GET', path: '/ready' },
      { method: 'GET', path: '/openapi.json' },
      { method: 'GET', path: '/api/v1/categories' },
      { method: 'POST', path: '/api/v1/points-of-sale', body: {}, token },
      { method: 'GET', path: '/api/v1/points-of-sale', token },
      { method: 'DELETE', path: '/api/v1/authorization', token },
      { method: 'GET', path: '/api/v1/admin/outbox', token: ADMIN_TOKEN },
      { method: 'POST', path: '/api/v1/admin/payers', body: { phone: uniquePhone(), name: 'X', pin: '1234' }, token: ADMIN_TOKEN },
    ];
    for (const probe of probes) {
      const reply = await call(lipa.mockUrl, probe.method, probe.path, {
        ...(probe.body !== undefined ? { body: probe.body } : {}),
        ...(probe.token ? { token: probe.token } : {}),
      });
      assert.equal(reply.status, 404, `${probe.method} ${probe.path}: ${reply.status} ${reply.text}`);
      assertError(reply, 404, 'not_found');
    }
    // The same paths do exist on the main listener.
    assert.equal((await call(lipa.url, 'GET', '/health')).status, 200);
    assert.equal((await call(lipa.url, 'GET', '/api/v1/categories')).status, 200);
  });
});
