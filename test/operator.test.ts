import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { hashOtp } from '../src/auth/login.js';
import { loadConfig } from '../src/config.js';
import type { AppError } from '../src/http/errors.js';
import { WindowLimiter } from '../src/http/rate-limit.js';
import { accountId, balanceOf, CASH_IN_OWNER, checkLedger } from '../src/ledger/ledger.js';
import { SUSPENDED_MESSAGE } from '../src/merchants/suspension.js';
import { sha256Hex } from '../src/security/tokens.js';
import { assertError, assertIso } from './helpers/assertions.js';
import {
  admin,
  call,
  categoryId,
  clientFor,
  createMerchant,
  createPayer,
  login,
  merchantSession,
  merchantWithPos,
  posBody,
  unique,
  uniquePhone,
} from './helpers/client.js';
import { ADMIN_TOKEN, freshDatabase, type Lipa, STAGING_OTP, startLipa } from './helpers/harness.js';
import { send, sms } from './helpers/messaging.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ROOT = new URL('..', import.meta.url).pathname;
const run = promisify(execFile);

const newMerchant = (lipa: Lipa, body: unknown) => admin(lipa, 'POST', '/api/v1/admin/merchants', body);
const newPayer = (lipa: Lipa, body: unknown) => admin(lipa, 'POST', '/api/v1/admin/payers', body);
const depositTo = (lipa: Lipa, phone: string, amount: unknown) => admin(lipa, 'POST', `/api/v1/admin/payers/${phone}/deposits`, { amount });
const payerBody = (overrides: Record<string, unknown> = {}) => ({ phone: uniquePhone(), name: 'Wanjiru', pin: '1357', ...overrides });

async function walletBalance(lipa: Lipa, phone: string): Promise<number | undefined> {
  const payer = await lipa.ctx.store.db.selectFrom('payers').select('id').where('phone', '=', phone).executeTakeFirst();
  if (!payer) return undefined;
  return balanceOf(lipa.ctx.store.db, accountId('wallet', payer.id));
}

describe('operator API (CONTRACT §2)', () => {
  let lipa: Lipa;
  before(async () => {
    // The 401 test below sends 21 wrong tokens; the guessing limit has its own test.
    lipa = await startLipa({ RATE_LIMIT_LOGIN_FAILURES: '50' });
  });
  after(() => lipa.close());

  test('POST /admin/merchants answers 201 {merchantId, login, name}, never the password', async () => {
    const input = { login: `${unique('shop')}@duka.example`, password: 'a long enough password', name: 'Duka la Mama' };
    const reply = await newMerchant(lipa, input);
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(Object.keys(reply.body).sort(), ['login', 'merchantId', 'name']);
    assert.match(reply.body.merchantId, UUID);
    assert.equal(reply.body.login, input.login);
    assert.equal(reply.body.name, input.name);
    assert.ok(!reply.text.includes(input.password));
    const row = await lipa.ctx.store.db
      .selectFrom('merchants')
      .selectAll()
      .where('id', '=', reply.body.merchantId)
      .executeTakeFirstOrThrow();
    assert.ok(!row.password_hash.includes(input.password), 'the password is stored hashed');
    // The new merchant can log in.
    assert.equal(typeof (await login(lipa, input.login, input.password)), 'string');

    // A login is kept as its code will be sent: trimmed, lower case; an IDN domain is fine.
    const local = unique('idn');
    const idn = await newMerchant(lipa, { ...input, login: ` ${local}@Bücher.example ` });
    assert.equal(idn.status, 201, idn.text);
    assert.equal(idn.body.login, `${local}@bücher.example`);
    assert.equal(typeof (await login(lipa, `${local}@BÜCHER.example`, input.password)), 'string');
  });

  test('a duplicate login, also differing only in case, answers 409 login_taken', async () => {
    const loginName = `${unique('dup')}@duka.example`;
    const first = await newMerchant(lipa, { login: loginName, password: 'password-1', name: 'First' });
    assert.equal(first.status, 201, first.text);
    assertError(await newMerchant(lipa, { login: loginName, password: 'password-2', name: 'Second' }), 409, 'login_taken');
    assertError(await newMerchant(lipa, { login: loginName.toUpperCase(), password: 'password-3', name: 'Third' }), 409, 'login_taken');
    const rows = await lipa.ctx.store.db.selectFrom('merchants').select('name').where('login', '=', loginName).execute();
    assert.deepEqual(rows, [{ name: 'First' }]);
  });

  test('a bad email, a short password or a missing name answers 422 naming the field', async () => {
    const good = () => ({ login: `${unique('v')}@duka.example`, password: 'long enough', name: 'Valid' });
    // The message says in words what the field must be (no JSON-schema jargon).
    const cases: Array<[string, Record<string, unknown>, string?]> = [
      ['login', { login: 'two@@duka.example' }],
      // Valid in the schema's email format, but no login code could be sent to them.
      ...[`${'c'.repeat(65)}@duka.example`, 'wanjiru@localhost', 'üser@duka.example', 'a@192.168.0.1', 'a@duka.x', 'not-an-email'].map(
        (login): [string, Record<string, unknown>, string] => [
          'login',
          { login },
          'login must be an email address a login code can be sent to',
        ],
      ),
      ['login', { login: 42 }, 'login must be a string'],
      ['password', { password: '1234567' }, 'password must be at least 8 characters long'],
      ['password', { password: 12345678 }, 'password must be a string'],
      ['name', { name: undefined }, 'name is required'],
      ['name', { name: '' }, 'name must not be empty'],
      ['name', { name: '   ' }, 'name must not be blank'],
      ['name', { name: 'x'.repeat(201) }, 'name must be at most 200 characters long'],
      ['name', { name: 'Duka\nLtd' }],
      ['login', { login: undefined }],
      ['password', { password: undefined }],
    ];
    for (const [field, override, says] of cases) {
      const body = { ...good(), ...override };
      const reply = await newMerchant(lipa, body);
      assertError(reply, 422, 'validation_failed', field);
      if (says) assert.equal(reply.body.error.message, says);
      if (typeof body.login === 'string') {
        const stored = await lipa.ctx.store.db.selectFrom('merchants').select('id').where('login', '=', body.login.toLowerCase()).execute();
        assert.deepEqual(stored, [], `nothing created for ${JSON.stringify(override)}`);
      }
    }
    // Exactly 8 characters is long enough.
    const eight = await newMerchant(lipa, { ...good(), password: '12345678' });
    assert.equal(eight.status, 201, eight.text);
  });

  test('no token or a wrong token answers 401 on every admin route, and changes nothing', async () => {
    const phone = uniquePhone();
    await createPayer(lipa, { phone, balance: 5 });
    const loginName = `${unique('anon')}@duka.example`;
    const routes: Array<[string, string, unknown]> = [
      ['POST', '/api/v1/admin/merchants', { login: loginName, password: 'password-ok', name: 'Anon' }],
      ['POST', '/api/v1/admin/payers', payerBody({ phone: '254799999999' })],
      ['POST', `/api/v1/admin/payers/${phone}/deposits`, { amount: 100 }],
      ['GET', '/api/v1/admin/outbox', undefined],
    ];
    const badHeaders: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token-0123456789' },
      { authorization: `Bearer ${ADMIN_TOKEN}x` },
      { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` },
      { authorization: `Basic ${ADMIN_TOKEN}` },
      { authorization: ADMIN_TOKEN },
    ];
    for (const [method, path, body] of routes) {
      for (const headers of badHeaders) {
        const reply = await call(lipa.url, method, path, { body, headers });
        assertError(reply, 401, 'unauthorized');
        assert.match(reply.headers.get('www-authenticate') ?? '', /^Bearer/);
      }
    }
    // A merchant's own session token is not the operator token either.
    const merchant = await createMerchant(lipa);
    const merchantToken = await login(lipa, merchant.login, merchant.password);
    assertError(await call(lipa.url, 'GET', '/api/v1/admin/outbox', { token: merchantToken }), 401, 'unauthorized');

    assert.equal(await walletBalance(lipa, phone), 500);
    assert.equal(await walletBalance(lipa, '254799999999'), undefined);
    assert.deepEqual(await lipa.ctx.store.db.selectFrom('merchants').select('id').where('login', '=', loginName).execute(), []);
  });

  test('guessing the operator token: after RATE_LIMIT_LOGIN_FAILURES wrong ones an IP gets 429, even with the right one', async () => {
    const guarded = await startLipa({ RATE_LIMIT_LOGIN_FAILURES: '3' });
    try {
      const outbox = (authorization?: string) =>
        call(guarded.url, 'GET', '/api/v1/admin/outbox', { headers: authorization ? { authorization } : {} });
      for (let i = 0; i < 5; i++) assertError(await outbox(), 401, 'unauthorized'); // no token: no guess
      assert.equal((await outbox(`Bearer ${ADMIN_TOKEN}`)).status, 200);
      for (let i = 0; i < 3; i++) assertError(await outbox(`Bearer guess-${i}-0123456789abcdef`), 401, 'unauthorized');
      for (const authorization of ['Bearer guess-3-0123456789abcdef', `Bearer ${ADMIN_TOKEN}`]) {
        const limited = await outbox(authorization);
        assertError(limited, 429, 'rate_limited');
        const retryAfter = Number(limited.headers.get('retry-after'));
        assert.ok(retryAfter > 800 && retryAfter <= 900, `Retry-After ${retryAfter}`);
      }
    } finally {
      await guarded.close();
    }
  });

  test('the guessing window starts at the first wrong token, not at the first request', () => {
    let now = 0;
    const limiter = new WindowLimiter(2, 15 * 60_000, () => now);
    limiter.check('203.0.113.7'); // a right token: checked, not counted
    now += 10 * 60_000;
    limiter.check('203.0.113.7');
    limiter.hit('203.0.113.7');
    limiter.hit('203.0.113.7');
    const refused = (() => {
      try {
        limiter.check('203.0.113.7');
      } catch (error) {
        return error as AppError;
      }
    })();
    assert.equal(refused?.code, 'rate_limited');
    assert.equal(refused?.headers?.['Retry-After'], String(15 * 60), 'a whole window from the first wrong token');
    now += 15 * 60_000;
    limiter.check('203.0.113.7');
  });

  test('behind a proxy in TRUST_PROXY the guessing limit counts the client X-Forwarded-For names, not the proxy', async () => {
    const proxied = await startLipa({ RATE_LIMIT_LOGIN_FAILURES: '2', TRUST_PROXY: '127.0.0.1' });
    try {
      const outbox = (client: string, token: string) =>
        call(proxied.url, 'GET', '/api/v1/admin/outbox', { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': client } });
      for (let i = 0; i < 2; i++) assertError(await outbox('203.0.113.7', `guess-${i}-0123456789abcdef`), 401, 'unauthorized');
      assertError(await outbox('203.0.113.7', ADMIN_TOKEN), 429, 'rate_limited');
      assert.equal((await outbox('198.51.100.20', ADMIN_TOKEN)).status, 200, 'the operator, at another address, is not locked out');
    } finally {
      await proxied.close();
    }
    // Without TRUST_PROXY the header is the client's word only, and is ignored.
    const direct = await startLipa({ RATE_LIMIT_LOGIN_FAILURES: '2' });
    try {
      for (const client of ['203.0.113.1', '203.0.113.2']) {
        const reply = await call(direct.url, 'GET', '/api/v1/admin/outbox', {
          headers: { authorization: 'Bearer guess-0123456789abcdef', 'x-forwarded-for': client },
        });
        assertError(reply, 401, 'unauthorized');
      }
      const forged = await call(direct.url, 'GET', '/api/v1/admin/outbox', {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-forwarded-for': '203.0.113.3' },
      });
      assertError(forged, 429, 'rate_limited');
    } finally {
      await direct.close();
    }
    assert.throws(() => loadConfig({ TRUST_PROXY: 'proxy.internal' }), /TRUST_PROXY/);
    assert.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' }), /TRUST_PROXY/);
    assert.deepEqual(loadConfig({ TRUST_PROXY: ' 10.0.0.7, 10.1.0.0/16,::1' }).trustProxy, ['10.0.0.7', '10.1.0.0/16', '::1']);
  });

  test('POST /admin/payers answers 201 {payerId, phone, balance}; balance is optional (0)', async () => {
    const withBalance = payerBody({ balance: 250.5 });
    const reply = await newPayer(lipa, withBalance);
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(Object.keys(reply.body).sort(), ['balance', 'payerId', 'phone']);
    assert.match(reply.body.payerId, UUID);
    assert.equal(reply.body.phone, withBalance.phone);
    assert.equal(reply.body.balance, 250.5);
    assert.ok(!reply.text.includes(withBalance.pin));
    assert.equal(await walletBalance(lipa, withBalance.phone), 25050);

    const without = payerBody();
    const noBalance = await newPayer(lipa, without);
    assert.equal(noBalance.status, 201, noBalance.text);
    assert.deepEqual(noBalance.body, { payerId: noBalance.body.payerId, phone: without.phone, balance: 0 });
    assert.equal(await walletBalance(lipa, without.phone), 0);

    const zero = await newPayer(lipa, payerBody({ balance: 0 }));
    assert.equal(zero.status, 201, zero.text);
    assert.equal(zero.body.balance, 0);

    // Boundaries: 8 and 15 digits, 4- and 6-digit PINs.
    for (const [phone, pin] of [
      [`1${String(Date.now()).slice(-7)}`, '1234'],
      [`2547${String(Date.now()).slice(-11)}`, '123456'],
    ]) {
      const edge = await newPayer(lipa, payerBody({ phone, pin }));
      assert.equal(edge.status, 201, edge.text);
    }
  });

  test('a duplicate phone answers 409 phone_taken and leaves the first wallet alone', async () => {
    const body = payerBody({ balance: 10 });
    assert.equal((await newPayer(lipa, body)).status, 201);
    assertError(await newPayer(lipa, { ...body, name: 'Impostor', pin: '9999', balance: 99999 }), 409, 'phone_taken');
    assert.equal(await walletBalance(lipa, body.phone), 1000);
    const rows = await lipa.ctx.store.db.selectFrom('payers').select('name').where('phone', '=', body.phone).execute();
    assert.deepEqual(rows, [{ name: 'Wanjiru' }]);
  });

  test('a bad phone, PIN or balance answers 422 naming the field; nothing is created', async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['phone', { phone: `+${uniquePhone()}` }],
      ['phone', { phone: '2547abc12345' }],
      ['phone', { phone: '1234567' }],
      ['phone', { phone: '1234567890123456' }],
      ['phone', { phone: 254712345678 }],
      // No country calling code: how a number is dialled at home, or no number at all.
      ['phone', { phone: '0712345678' }],
      ['phone', { phone: '00000001' }],
      ['phone', { phone: '2540712345678' }],
      ['phone', { phone: '280123456' }],
      ['pin', { pin: '123' }],
      ['pin', { pin: '1234567' }],
      ['pin', { pin: 'abcd' }],
      ['pin', { pin: 1234 }],
      ['balance', { balance: -1 }],
      ['balance', { balance: -0.01 }],
      ['balance', { balance: 10.123 }],
      ['balance', { balance: 10_000_000.01 }],
      ['balance', { balance: '100' }],
      ['name', { name: '' }],
      ['name', { name: ' \t ' }],
    ];
    for (const [field, override] of cases) {
      const body = payerBody(override);
      assertError(await newPayer(lipa, body), 422, 'validation_failed', field);
      if (typeof body.phone === 'string') {
        const stored = await lipa.ctx.store.db.selectFrom('payers').select('id').where('phone', '=', body.phone).execute();
        assert.deepEqual(stored, [], `nothing created for ${JSON.stringify(override)}`);
      }
    }
    // The phone refused with a 3-decimal balance is still free.
    const body = payerBody({ balance: 1.005 });
    assertError(await newPayer(lipa, body), 422, 'validation_failed', 'balance');
    const retry = await newPayer(lipa, { ...body, balance: 1.01 });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.body.balance, 1.01);
  });

  test('deposits answer 200 {phone, balance} and add exactly', async () => {
    const payer = await createPayer(lipa, { balance: 1000.1 });
    const reply = await depositTo(lipa, payer.phone, 0.2);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(Object.keys(reply.body).sort(), ['balance', 'phone']);
    assert.deepEqual(reply.body, { phone: payer.phone, balance: 1000.3 });
    assert.equal(await walletBalance(lipa, payer.phone), 100030);
    // The phone is in the deposit's path; the request's log line masks it.
    const logged = lipa.logs.filter((line) => line.includes('/deposits'));
    assert.ok(logged.length > 0, 'the deposit request was logged');
    for (const line of logged) assert.ok(!line.includes(payer.phone), line);
    assert.ok(logged.some((line) => line.includes(`/payers/${payer.phone.slice(0, 4)}•••••${payer.phone.slice(-3)}/deposits`)));

    // Amounts whose binary floating-point forms do not add (or scale by 100) exactly.
    const sequences: Array<{ opening: number; steps: Array<[amount: number, balance: number]> }> = [
      {
        opening: 0.1,
        steps: [
          [0.2, 0.3],
          [0.1, 0.4],
          [0.07, 0.47],
          [0.53, 1],
        ],
      },
      {
        opening: 1234567.89,
        steps: [
          [0.11, 1234568],
          [4.56, 1234572.56],
        ],
      },
      {
        opening: 0,
        steps: [
          [1.15, 1.15],
          [2.3, 3.45],
          [4.35, 7.8],
          [0.29, 8.09],
        ],
      },
      {
        opening: 0.57,
        steps: [
          [9.95, 10.52],
          [19.99, 30.51],
          [0.57, 31.08],
        ],
      },
    ];
    for (const { opening, steps } of sequences) {
      const wallet = await createPayer(lipa, { balance: opening });
      for (const [amount, balance] of steps) {
        const step = await depositTo(lipa, wallet.phone, amount);
        assert.equal(step.status, 200, step.text);
        assert.deepEqual(step.body, { phone: wallet.phone, balance }, `${opening} + … + ${amount}`);
        const stored = await walletBalance(lipa, wallet.phone);
        assert.ok(Number.isInteger(stored), `the wallet holds whole cents, not ${stored}`);
        assert.equal(stored, Math.round(balance * 100), `${opening} + … + ${amount} in cents`);
      }
    }
  });

  test('concurrent deposits to one wallet are all counted', async () => {
    const payer = await createPayer(lipa, { balance: 0 });
    const replies = await Promise.all(Array.from({ length: 50 }, () => depositTo(lipa, payer.phone, 0.01)));
    for (const reply of replies) assert.equal(reply.status, 200, reply.text);
    // Each answer is the balance its own deposit made: 0.01, 0.02, … 0.50, each once.
    assert.deepEqual(
      replies.map((r) => r.body.balance).sort((a, b) => a - b),
      Array.from({ length: 50 }, (_, i) => (i + 1) / 100),
    );
    assert.equal(await walletBalance(lipa, payer.phone), 50);
    assert.deepEqual((await depositTo(lipa, payer.phone, 0.5)).body, { phone: payer.phone, balance: 1 });
  });

  test('a deposit to an unknown phone answers 404; a bad amount 422; the balance is unchanged', async () => {
    let unknown = uniquePhone();
    while ((await walletBalance(lipa, unknown)) !== undefined) unknown = uniquePhone();
    assertError(await depositTo(lipa, unknown, 10), 404, 'not_found');
    assert.equal(await walletBalance(lipa, unknown), undefined);

    const payer = await createPayer(lipa, { balance: 50 });
    for (const amount of [0, -1, -0.01, 1.234, 0.001, 10_000_000.01, '10', null, true]) {
      assertError(await depositTo(lipa, payer.phone, amount), 422, 'validation_failed', 'amount');
    }
    assertError(await admin(lipa, 'POST', `/api/v1/admin/payers/${payer.phone}/deposits`, {}), 422, 'validation_failed', 'amount');
    assertError(await depositTo(lipa, `%2B${payer.phone}`, 10), 422, 'validation_failed', 'phone');
    assert.equal(await walletBalance(lipa, payer.phone), 5000);
  });

  test('GET /api/v1/categories (no auth) lists at least 20 real MCCs with stable UUIDs', async () => {
    const reply = await call(lipa.url, 'GET', '/api/v1/categories');
    assert.equal(reply.status, 200, reply.text);
    assert.ok(Array.isArray(reply.body));
    assert.ok(reply.body.length >= 20, `only ${reply.body.length} categories`);
    for (const category of reply.body) {
      assert.deepEqual(Object.keys(category).sort(), ['categoryId', 'mcc', 'name']);
      assert.match(category.categoryId, UUID);
      assert.match(category.mcc, /^[0-9]{4}$/);
      assert.equal(typeof category.name, 'string');
      assert.ok(category.name.trim().length > 0);
    }
    const ids = reply.body.map((c: { categoryId: string }) => c.categoryId);
    const mccs = reply.body.map((c: { mcc: string }) => c.mcc);
    assert.equal(new Set(ids).size, ids.length, 'ids are unique');
    assert.equal(new Set(mccs).size, mccs.length, 'MCCs are unique');
    const grocery = reply.body.find((c: { mcc: string }) => c.mcc === '5411');
    assert.equal(grocery?.categoryId, '134a3105-73c3-50da-bf62-14670019ccda');
    assert.match(grocery?.name ?? '', /grocer/i);

    // A second, fresh database gives the very same ids.
    const other = await startLipa();
    try {
      const again = await call(other.url, 'GET', '/api/v1/categories');
      assert.equal(again.status, 200);
      assert.deepEqual(again.body, reply.body);
    } finally {
      await other.close();
    }
  });

  test('GET /api/v1/admin/outbox lists what was sent, newest first', async () => {
    const first = await createMerchant(lipa);
    const second = await createMerchant(lipa);
    await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: first.login, password: first.password } });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: second.login, password: second.password } });

    const reply = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
    assert.equal(reply.status, 200, reply.text);
    assert.ok(Array.isArray(reply.body.data));
    const times: number[] = reply.body.data.map((m: { createdAt: string }) => Date.parse(m.createdAt));
    for (let i = 1; i < times.length; i++)
      assert.ok((times[i - 1] ?? 0) >= (times[i] ?? 0), `message ${i} is not older than message ${i - 1}`);
    const iFirst = reply.body.data.findIndex((m: { to: string }) => m.to === first.login);
    const iSecond = reply.body.data.findIndex((m: { to: string }) => m.to === second.login);
    assert.ok(iFirst >= 0 && iSecond >= 0, 'both OTP emails are in the outbox');
    assert.ok(iSecond < iFirst, 'the newer message comes first');
    const message = reply.body.data[iSecond];
    assert.deepEqual(Object.keys(message).sort(), [
      'content',
      'contentType',
      'createdAt',
      'id',
      'purpose',
      'status',
      'subject',
      'to',
      'type',
    ]);
    assert.equal(message.type, 'email');
    assert.equal(message.purpose, 'otp');
    assert.equal(typeof message.subject, 'string');
    assert.match(message.content, /\b[0-9]{6}\b/);
    assert.equal(message.status, 'delivered');
    assertIso(message.createdAt);

    const limited = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=1');
    assert.equal(limited.status, 200);
    assert.equal(limited.body.data.length, 1);
    assert.deepEqual(limited.body.data[0], reply.body.data[0]);
  });
});

describe('suspending a merchant', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  const standing = (merchantId: string, action: 'suspend' | 'reinstate') =>
    admin(lipa, 'POST', `/api/v1/admin/merchants/${encodeURIComponent(merchantId)}/${action}`);

  test('revokes its keys, ends its sessions and sign-in under way, refuses its right password with 403; reinstating lets it sign in', async () => {
    const merchant = await merchantWithPos(lipa);
    const client = clientFor(lipa.url, merchant);
    const messagingKey = (await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: merchant.token, body: {} })).body.apiKey;
    assert.equal((await send(lipa, messagingKey, sms())).status, 201);
    // A sign-in under way: its code was sent, not yet confirmed.
    assert.equal(
      (await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } })).status,
      200,
    );

    const suspended = await standing(merchant.merchantId, 'suspend');
    assert.equal(suspended.status, 200, suspended.text);
    assert.deepEqual(Object.keys(suspended.body).sort(), ['login', 'merchantId', 'name', 'suspendedAt']);
    assertIso(suspended.body.suspendedAt);

    assertError(await call(lipa.url, 'GET', '/api/v1/me', { token: merchant.token }), 401, 'unauthorized');
    const status = await client.paymentStatus('pay_000000000000000000000000');
    assert.equal(status.status, 403, JSON.stringify(status.body));
    assert.equal((status.body as { error: { code: string } }).error.code, 'unknown_key');
    const refusedSms = await send(lipa, messagingKey, sms());
    assert.equal(refusedSms.status, 401, refusedSms.text);
    assertError(
      await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: STAGING_OTP } }),
      401,
      'invalid_otp',
    );
    // The right password is told why; a wrong one learns nothing new.
    assertError(
      await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } }),
      403,
      'account_suspended',
    );
    assertError(
      await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: 'not-the-password' } }),
      401,
      'invalid_credentials',
    );
    const listed = (await admin(lipa, 'GET', '/api/v1/admin/merchants?limit=200')).body.data.find(
      (m: { merchantId: string }) => m.merchantId === merchant.merchantId,
    );
    assert.equal(listed.suspendedAt, suspended.body.suspendedAt);
    // Again: the same answer, the first suspension's time kept.
    assert.deepEqual((await standing(merchant.merchantId, 'suspend')).body, suspended.body);

    const reinstated = await standing(merchant.merchantId, 'reinstate');
    assert.equal(reinstated.status, 200, reinstated.text);
    assert.equal(reinstated.body.suspendedAt, null);
    const token = await login(lipa, merchant.login, merchant.password);
    assert.equal((await call(lipa.url, 'GET', '/api/v1/me', { token })).status, 200);
    // Its old keys stay revoked: it makes new ones.
    assert.equal((await client.paymentStatus('pay_000000000000000000000000')).status, 403);
    const fresh = await call(lipa.url, 'POST', '/api/v1/api-keys', { token, body: {} });
    assert.equal(fresh.status, 201, fresh.text);
  });

  test('what a sign-in or a session under way makes after the suspension commits is refused: a session, a key, a point of sale', async () => {
    const merchant = await merchantSession(lipa);
    assert.equal((await standing(merchant.merchantId, 'suspend')).status, 200);
    const db = lipa.ctx.store.db;
    const now = Date.now();
    // A login code written after the suspension's clean-up (its sign-in had passed the password
    // check before): confirming it opens no session.
    await db
      .insertInto('otp_challenges')
      .values({
        id: randomUUID(),
        login: merchant.login,
        subject_type: 'merchant',
        subject_id: merchant.merchantId,
        otp_hash: hashOtp(lipa.ctx, merchant.login, '246810'),
        attempts: 0,
        created_at: now,
        expires_at: now + 60_000,
        consumed_at: null,
      })
      .execute();
    assertError(
      await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: '246810' } }),
      403,
      'account_suspended',
    );
    assert.deepEqual(await db.selectFrom('sessions').select('id').where('subject_id', '=', merchant.merchantId).execute(), []);
    // A session checked just before the suspension, whose request goes on after it: no key.
    const token = 'lipa_mt_made-before-the-suspension';
    await db
      .insertInto('sessions')
      .values({
        id: randomUUID(),
        token_hash: sha256Hex(token),
        subject_type: 'merchant',
        subject_id: merchant.merchantId,
        audience: 'main',
        created_at: now,
        expires_at: now + 60_000,
      })
      .execute();
    for (const path of ['/api/v1/api-keys', '/api/v1/messaging-keys']) {
      assertError(await call(lipa.url, 'POST', path, { token, body: {} }), 403, 'account_suspended');
    }
    const pos = posBody(merchant.merchantId, await categoryId(lipa));
    assertError(await call(lipa.url, 'POST', '/api/v1/points-of-sale', { token, body: pos }), 403, 'account_suspended');
    assert.equal(
      await db.selectFrom('points_of_sale').select('id').where('terminal_id', '=', pos.terminalId).executeTakeFirst(),
      undefined,
    );
  });

  test("its messages still queued are failed, saying why; another merchant's are left alone", async () => {
    const [suspended, other] = [await merchantSession(lipa), await merchantSession(lipa)];
    const now = Date.now();
    const queued = (merchantId: string) => ({
      id: `msg_${randomUUID().replaceAll('-', '')}`,
      merchant_id: merchantId,
      purpose: 'api',
      type: 'sms' as const,
      email: null,
      subject: null,
      content_type: null,
      phone_country_code: '254',
      phone_number: '712345678',
      content: 'Waiting for the SMSC',
      status: 'queued' as const,
      created_at: now,
      updated_at: now,
      messaging_key_id: null,
      provider_id: null,
      segments: 1,
      attempts: 1,
      // Retried later (as after an SMSC outage): the embedded outbox's worker leaves it be meanwhile.
      next_attempt_at: now + 3_600_000,
      locked_until: 0,
      last_error: 'SMSC down',
      failure_reason: null,
    });
    const [mine, theirs] = [queued(suspended.merchantId), queued(other.merchantId)];
    await lipa.ctx.store.db.insertInto('messages').values([mine, theirs]).execute();
    assert.equal((await standing(suspended.merchantId, 'suspend')).status, 200);
    const rows = await lipa.ctx.store.db
      .selectFrom('messages')
      .select(['id', 'status', 'failure_reason'])
      .where('id', 'in', [mine.id, theirs.id])
      .orderBy('id')
      .execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.deepEqual(byId.get(mine.id), { id: mine.id, status: 'failed', failure_reason: SUSPENDED_MESSAGE });
    assert.deepEqual(byId.get(theirs.id), { id: theirs.id, status: 'queued', failure_reason: null });
  });

  test('an unknown merchant is 404; without the operator token 401, and nothing changes', async () => {
    for (const action of ['suspend', 'reinstate'] as const) {
      assertError(await standing('no-such-merchant', action), 404, 'not_found');
    }
    const merchant = await createMerchant(lipa);
    assertError(await call(lipa.url, 'POST', `/api/v1/admin/merchants/${merchant.merchantId}/suspend`), 401, 'unauthorized');
    assert.equal(
      (await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } })).status,
      200,
    );
  });
});

describe('ledger after payers and deposits', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('checkLedger balances and cash-in is minus the sum of all deposits', async () => {
    const db = lipa.ctx.store.db;
    const cashIn = accountId('cash_in', CASH_IN_OWNER);
    const start = await checkLedger(db);
    assert.deepEqual(start, { total: 0, mismatched: [], negative: [], unbalanced: [], statements: [] });
    const cashInBefore = (await balanceOf(db, cashIn)) ?? 0;

    // Minor units deposited by this test: opening balances and cash-ins.
    let deposited = 0;
    const plan: Array<{ balance: number; deposits: number[] }> = [
      { balance: 1000.1, deposits: [0.2, 0.1, 0.01] },
      { balance: 0, deposits: [0.3, 0.3, 0.3] },
      { balance: 99.99, deposits: [0.01] },
      { balance: 12.34, deposits: [] },
      { balance: 4.56, deposits: [1.15, 2.3, 0.07, 0.57] },
    ];
    const phones: string[] = [];
    for (const { balance, deposits } of plan) {
      const payer = await createPayer(lipa, { balance });
      phones.push(payer.phone);
      deposited += Math.round(balance * 100);
      for (const amount of deposits) {
        const reply = await depositTo(lipa, payer.phone, amount);
        assert.equal(reply.status, 200, reply.text);
        deposited += Math.round(amount * 100);
      }
    }
    // A refused deposit moves nothing.
    assert.equal((await depositTo(lipa, phones[0] as string, 1.001)).status, 422);

    const report = await checkLedger(db);
    assert.deepEqual(report, { total: 0, mismatched: [], negative: [], unbalanced: [], statements: [] });
    assert.equal(await balanceOf(db, cashIn), cashInBefore - deposited);

    const wallets = await Promise.all(phones.map((phone) => walletBalance(lipa, phone)));
    assert.deepEqual(wallets, [100041, 90, 10000, 1234, 865]);
    assert.equal(
      wallets.reduce((sum: number, w) => sum + (w ?? 0), 0),
      deposited,
    );
  });
});

describe('operator CLI', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  const cli = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: lipa.databaseUrl, ADMIN_TOKEN: 'cli-admin-token-0123456789', LIPA_ENV: 'staging' },
      timeout: 30_000,
    });

  test('on a staging database the service never served, the test payers are there already', async () => {
    const database = await freshDatabase();
    try {
      const onFresh = (args: string[]) =>
        run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
          cwd: ROOT,
          env: { ...process.env, DATABASE_URL: database.url, ADMIN_TOKEN: 'cli-admin-token-0123456789', LIPA_ENV: 'staging' },
          timeout: 30_000,
        });
      await assert.rejects(
        onFresh(['payer', 'deposit', '--phone', '254708000004', '--amount', '5']),
        refused(/^lipa: Staging test payer 254708000004 always has no money/m),
      );
      const payers = JSON.parse((await onFresh(['payer', 'list'])).stdout).data as Array<{ phone: string }>;
      for (const phone of ['254708000001', '254708000002', '254708000003', '254708000004']) {
        assert.ok(
          payers.some((p) => p.phone === phone),
          phone,
        );
      }
    } finally {
      await database.drop();
    }
  });

  test('--help exits 0 and lists the commands', async () => {
    const { stdout } = await cli(['--help']);
    for (const command of ['merchant create', 'payer create', 'payer deposit'])
      assert.ok(stdout.includes(command), `help lists ${command}`);
  });

  test('merchant create prints JSON, the merchant can log in over HTTP, and a duplicate exits 1', async () => {
    const input = { login: `${unique('cli')}@duka.example`, password: 'from the shell', name: 'CLI Duka' };
    const args = ['merchant', 'create', '--login', input.login, '--password', input.password, '--name', input.name];
    const { stdout } = await cli(args);
    const created = JSON.parse(stdout);
    assert.match(created.merchantId, UUID);
    assert.equal(created.login, input.login);
    assert.equal(created.name, input.name);

    const token = await login(lipa, input.login, input.password);
    const pos = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { token });
    assert.equal(pos.status, 200, pos.text);
    assert.deepEqual(pos.body, []);

    await assert.rejects(cli(args), (error: Error & { code?: number; stdout?: string; stderr?: string }) => {
      assert.equal(error.code, 1);
      assert.equal(error.stdout, '');
      assert.match(error.stderr ?? '', /already exists/);
      assert.ok((error.stderr ?? '').includes(input.login));
      return true;
    });
  });

  const refused = (pattern: RegExp) => (error: Error & { code?: number; stdout?: string; stderr?: string }) => {
    assert.equal(error.code, 1);
    assert.equal(error.stdout, '');
    assert.equal((error.stderr ?? '').trim().split('\n').length, 1, error.stderr);
    assert.match(error.stderr ?? '', pattern);
    return true;
  };

  test('the CLI validates as the operator API does: a bad login or a short password exits 1 and creates nothing', async () => {
    const before = (await admin(lipa, 'GET', '/api/v1/admin/merchants?limit=200')).body.data.length;
    await assert.rejects(
      cli(['merchant', 'create', '--login', 'not an email', '--password', 'long enough', '--name', 'X']),
      refused(/login must be an email address/),
    );
    await assert.rejects(
      cli(['merchant', 'create', '--login', `${unique('cli')}@duka.example`, '--password', 'short', '--name', 'X']),
      refused(/password/),
    );
    assert.equal((await admin(lipa, 'GET', '/api/v1/admin/merchants?limit=200')).body.data.length, before);
  });

  test('an unknown option or an amount that is not a decimal number is one line and exit 1', async () => {
    await assert.rejects(cli(['categories', '--bogus', 'x']), refused(/^lipa: Unknown option '--bogus' \(see --help\)$/m));
    // A value that starts with a dash reads as an option: the refusal says how to write it.
    await assert.rejects(
      cli(['merchant', 'list', '--limit', '-1']),
      refused(/^lipa: --limit needs a value; one that starts with a dash is written --limit=-…$/m),
    );
    const payer = { phone: uniquePhone(), name: 'CLI payer', pin: '2468' };
    await cli(['payer', 'create', '--phone', payer.phone, '--name', payer.name, '--pin', payer.pin]);
    await assert.rejects(
      cli(['payer', 'deposit', '--phone', payer.phone, '--amount', '0x10']),
      refused(/--amount must be a decimal number/),
    );
    // The digits as typed reach the API, which refuses more than a double keeps (not rounded to 1).
    await assert.rejects(
      cli(['payer', 'deposit', '--phone', payer.phone, '--amount', '1.0000000000000001']),
      refused(/more than 15 significant digits/),
    );
    const { stdout } = await cli(['payer', 'deposit', '--phone', payer.phone, '--amount', '16.25']);
    assert.deepEqual(JSON.parse(stdout), { phone: payer.phone, balance: 16.25 });
  });

  test('--password - and --pin - read the secret from standard input, off the command line', async () => {
    const email = `${unique('cli')}@duka.example`;
    const created = run(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'merchant', 'create', '--login', email, '--password', '-', '--name', 'Stdin Duka'],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: lipa.databaseUrl, LIPA_ENV: 'staging' },
        timeout: 30_000,
      },
    );
    created.child.stdin?.end('a secret with spaces\nnot this line\n');
    assert.equal(JSON.parse((await created).stdout).login, email);
    assert.equal(typeof (await login(lipa, email, 'a secret with spaces')), 'string', 'the first line is the password');

    // A first line that never ends (a stream piped in by mistake): read no further than 1,024
    // characters, refused, the input left open and nothing created.
    const endless = `${unique('cli')}@duka.example`;
    const refusedRun = run(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'merchant', 'create', '--login', endless, '--password', '-', '--name', 'Endless Duka'],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: lipa.databaseUrl, LIPA_ENV: 'staging' }, timeout: 30_000 },
    );
    refusedRun.child.stdin?.write('y'.repeat(4_096));
    await assert.rejects(refusedRun, refused(/the first line of standard input is over 1024 characters/));
    const merchants = (await admin(lipa, 'GET', '/api/v1/admin/merchants?limit=200')).body.data as { login: string }[];
    assert.ok(!merchants.some((m) => m.login === endless), 'nothing created');
  });

  test('merchant suspend and reinstate print what the operator API answers; the merchant is refused, then let in', async () => {
    const merchant = await createMerchant(lipa);
    const suspended = JSON.parse((await cli(['merchant', 'suspend', '--id', merchant.merchantId])).stdout);
    assert.equal(suspended.merchantId, merchant.merchantId);
    assertIso(suspended.suspendedAt);
    const signIn = () => call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    assertError(await signIn(), 403, 'account_suspended');
    assert.equal(JSON.parse((await cli(['merchant', 'reinstate', '--id', merchant.merchantId])).stdout).suspendedAt, null);
    assert.equal((await signIn()).status, 200);
    await assert.rejects(cli(['merchant', 'suspend']), refused(/--id is required/));
  });

  test('merchant settle pays out part of the balance as the operator API does; more than the balance is refused', async () => {
    const merchant = await createMerchant(lipa);
    // Give the merchant 30.00 through the ledger, as a paid payment would.
    const { postTransaction } = await import('../src/ledger/ledger.js');
    await lipa.ctx.store.write((tx) =>
      postTransaction(
        tx,
        {
          kind: 'payment',
          reference: `pay_cli_${merchant.merchantId}`,
          postings: [
            { accountId: accountId('cash_in', CASH_IN_OWNER), amount: -3000 },
            { accountId: accountId('merchant', merchant.merchantId), amount: 3000 },
          ],
        },
        Date.now(),
      ),
    );
    const settled = JSON.parse(
      (await cli(['merchant', 'settle', '--id', merchant.merchantId, '--amount', '12.50', '--reference', 'BANK-1'])).stdout,
    );
    assert.deepEqual(
      [settled.merchantId, settled.amount, settled.currency, settled.reference],
      [merchant.merchantId, 12.5, 'KES', 'BANK-1'],
    );
    assert.equal(await balanceOf(lipa.ctx.store.db, accountId('merchant', merchant.merchantId)), 1750);
    await assert.rejects(
      cli(['merchant', 'settle', '--id', merchant.merchantId, '--amount', '17.51', '--reference', 'BANK-2']),
      refused(/balance is less than KES 17\.51/),
    );
    await assert.rejects(cli(['merchant', 'settle', '--id', merchant.merchantId, '--amount', '1']), refused(/--reference is required/));
    assert.deepEqual((await checkLedger(lipa.ctx.store.db)).statements, []);
  });

  test('merchant list, payer list and outbox print a page of what the operator API answers; --cursor reads the next', async () => {
    for (const [args, path] of [
      [['merchant', 'list', '--limit', '5'], '/api/v1/admin/merchants?limit=5'],
      [['payer', 'list'], '/api/v1/admin/payers'],
      [['outbox', '--limit', '3'], '/api/v1/admin/outbox?limit=3'],
    ] as const) {
      const { stdout } = await cli([...args]);
      assert.deepEqual(JSON.parse(stdout), (await admin(lipa, 'GET', path)).body, args.join(' '));
    }
    const first = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=1');
    assert.equal(typeof first.body.nextCursor, 'string', 'more than one message was sent');
    const next = JSON.parse((await cli(['outbox', '--limit', '1', '--cursor', first.body.nextCursor])).stdout);
    const viaApi = await admin(lipa, 'GET', `/api/v1/admin/outbox?limit=1&cursor=${encodeURIComponent(first.body.nextCursor)}`);
    assert.deepEqual(next, viaApi.body);
    assert.notEqual(next.data[0].id, first.body.data[0].id, 'the second page, not the first again');
    await assert.rejects(cli(['outbox', '--cursor', 'made-up']), refused(/cursor is not a cursor this list gave out/));
    await assert.rejects(cli(['merchant', 'list', '--limit', '0']), refused(/limit must be a whole number from 1 to 500/));
  });

  test('categories prints what GET /api/v1/categories answers', async () => {
    const { stdout } = await cli(['categories']);
    assert.deepEqual(JSON.parse(stdout), (await call(lipa.url, 'GET', '/api/v1/categories')).body);
  });
});
