import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type LipaClient, type Payment, signRequest } from '../src/client/index.js';
import { expireDuePayments } from '../src/payments/expire.js';
import {
  admin,
  call,
  categoryId,
  clientFor,
  createPayer,
  lastOtpSentTo,
  type MerchantSetup,
  merchantWithPos,
  payerToken,
  paymentBody,
  posBody,
  type Reply,
  uniquePhone,
} from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** Endpoints 5 and 6 (CONTRACT §6): create, status, validation, idempotency, no_user. */

type Json = Reply['body'];

const CREATE = '/api/public/v1/merchant-payments';
const STATUS = '/api/public/v1/merchant-payments/status';
const FIELDS = [
  'amount',
  'createdAt',
  'currency',
  'description',
  'expiresAt',
  'merchantStika',
  'orderId',
  'paymentIdentifier',
  'paymentUrl',
  'refundedAmount',
  'status',
  'terminalId',
  'updatedAt',
];

const create = (client: LipaClient, body: unknown) => client.post<Json>(CREATE, body);
const statusOf = (client: LipaClient, paymentIdentifier: string) => client.post<Json>(STATUS, { paymentIdentifier });

/** A phone with no wallet: uniquePhone() but never one of the staging test payers. */
function unregisteredPhone(): string {
  for (;;) {
    const phone = uniquePhone();
    if (!phone.startsWith('25470800000')) return phone;
  }
}

async function paymentRows(lipa: Lipa): Promise<number> {
  const row = await lipa.ctx.store.db
    .selectFrom('payments')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

interface OutboxEntry {
  to: string;
  purpose: string;
  type: string;
  content: string;
}

/** The payment prompts the service sent to `phone`, newest first. */
async function promptsTo(lipa: Lipa, phone: string): Promise<OutboxEntry[]> {
  const reply = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
  assert.equal(reply.status, 200, reply.text);
  return (reply.body.data as OutboxEntry[]).filter((m) => m.to === phone && m.purpose === 'payment_prompt');
}

/** Polls `probe` until it returns something other than undefined. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 8000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A deep copy of `body` with `path` (dotted) set to `value`, or removed when value is REMOVE. */
const REMOVE = Symbol('remove');
function withField(body: object, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(body) as Record<string, unknown>;
  const keys = path.split('.');
  const last = keys.pop() as string;
  let target = copy;
  for (const key of keys) target = target[key] as Record<string, unknown>;
  if (value === REMOVE) delete target[last];
  else target[last] = value;
  return copy;
}

function assertValidation(reply: { status: number; body: Json }, field: string) {
  assert.equal(reply.status, 422, JSON.stringify(reply.body));
  assert.equal(reply.body.error.code, 'validation_failed');
  const fields: string[] = (reply.body.error.details ?? []).map((d: { field: string }) => d.field);
  assert.ok(fields.length > 0, `no details in ${JSON.stringify(reply.body)}`);
  assert.deepEqual([...new Set(fields)], [field], `details name ${field}: ${JSON.stringify(reply.body.error)}`);
  const said = (reply.body.error.details as { message: string }[]).map((d) => d.message);
  assert.equal(new Set(said).size, said.length, `each complaint once: ${JSON.stringify(said)}`);
}

describe('creating a payment and reading its status', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let other: MerchantSetup;
  let client: LipaClient;
  let otherClient: LipaClient;

  before(async () => {
    lipa = await startLipa();
    merchant = await merchantWithPos(lipa, { posCompanyName: 'Mama Mboga Traders' });
    other = await merchantWithPos(lipa);
    client = clientFor(lipa.url, merchant);
    otherClient = clientFor(lipa.url, other);
  });
  after(async () => {
    await lipa.close();
  });

  test('201 for a registered payer: full shape, pending, TTL, payment URL, and an SMS prompt', async () => {
    const payer = await createPayer(lipa);
    const body = paymentBody(merchant, { payer: { method: 'phone', value: payer.phone } });
    const before = Date.now();
    const reply = await create(client, body);
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const p = reply.body;
    assert.deepEqual(Object.keys(p).sort(), FIELDS);
    assert.equal(p.status, 'pending');
    assert.equal(p.refundedAmount, 0, 'nothing refunded yet');
    assert.equal(p.terminalId, merchant.terminalId);
    assert.equal(p.orderId, body.orderId);
    assert.equal(p.amount, 1500.5);
    assert.equal(p.currency, 'KES');
    assert.equal(p.merchantStika, 'KES_100234');
    assert.equal(p.description, 'Two bags of unga');
    for (const field of ['createdAt', 'updatedAt', 'expiresAt']) {
      assert.match(p[field], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, `${field} is ISO 8601 UTC`);
    }
    const createdAt = Date.parse(p.createdAt);
    assert.ok(createdAt >= before - 1000 && createdAt <= Date.now() + 1000, 'createdAt is now');
    assert.equal(p.updatedAt, p.createdAt);
    assert.equal(Date.parse(p.expiresAt) - createdAt, 120_000, 'default PAYMENT_TTL_SECONDS is 120');
    assert.match(p.paymentIdentifier, /^[A-Za-z0-9_-]{24,}$/);
    assert.ok(!p.paymentIdentifier.includes(body.orderId) && !p.paymentIdentifier.includes(merchant.terminalId));
    const url = new URL(p.paymentUrl);
    assert.equal(url.origin, lipa.url);
    assert.equal(url.pathname, `/pay/${p.paymentIdentifier}`);
    assert.ok(p.paymentUrl.endsWith(`/pay/${p.paymentIdentifier}`));

    const prompts = await promptsTo(lipa, payer.phone);
    assert.equal(prompts.length, 1, 'exactly one prompt');
    const [prompt] = prompts;
    assert.equal(prompt?.type, 'sms');
    assert.match(prompt?.content ?? '', /Mama Mboga Traders/, 'names the POS company');
    assert.match(prompt?.content ?? '', /1,?500\.50?\b/, 'names the amount');
    assert.ok(prompt?.content.includes(body.orderId), 'names the orderId');
  });

  test('identifiers are distinct and unpredictable from one payment to the next', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const reply = await create(client, paymentBody(merchant, { payer: { method: 'phone', value: unregisteredPhone() } }));
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
      ids.add(reply.body.paymentIdentifier);
    }
    assert.equal(ids.size, 3);
    const [a = '', b = ''] = [...ids];
    let common = 0;
    while (common < a.length && a[common] === b[common]) common++;
    assert.ok(a.length - common >= 20, `ids share too long a prefix: ${a} ${b}`);
  });

  test('201 no_user for an unregistered phone, and no prompt is sent', async () => {
    const phone = unregisteredPhone();
    const reply = await create(client, paymentBody(merchant, { payer: { method: 'phone', value: phone } }));
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.status, 'no_user');
    assert.deepEqual(Object.keys(reply.body).sort(), FIELDS);
    assert.deepEqual(await promptsTo(lipa, phone), []);
  });

  test('merchantStika, description and successRedirectUrl may be omitted', async () => {
    const body = paymentBody(merchant, {
      payer: { method: 'phone', value: unregisteredPhone() },
      urls: { callbackUrl: 'https://duka.example/cb' },
    });
    delete (body as Record<string, unknown>).merchantStika;
    delete (body as Record<string, unknown>).description;
    const reply = await create(client, body);
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.merchantStika, null);
    assert.equal(reply.body.description, null);
    const row = await lipa.ctx.store.db
      .selectFrom('payments')
      .select(['merchant_stika', 'description', 'success_redirect_url', 'callback_url'])
      .where('id', '=', reply.body.paymentIdentifier)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { merchant_stika: null, description: null, success_redirect_url: null, callback_url: 'https://duka.example/cb' });
  });

  test('amounts come back exactly and are stored as integer cents', async () => {
    const cases: Array<[number, number]> = [
      [0.07, 7],
      [1.15, 115],
      [2.3, 230],
      [4.56, 456],
      [1234.99, 123499],
      [0.01, 1],
      [250000, 25000000],
    ];
    for (const [amount, cents] of cases) {
      const reply = await create(client, paymentBody(merchant, { amount, payer: { method: 'phone', value: unregisteredPhone() } }));
      assert.equal(reply.status, 201, `${amount}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.amount, amount);
      const status = await statusOf(client, reply.body.paymentIdentifier);
      assert.equal(status.body.amount, amount);
      const row = await lipa.ctx.store.db
        .selectFrom('payments')
        .select('amount')
        .where('id', '=', reply.body.paymentIdentifier)
        .executeTakeFirstOrThrow();
      assert.equal(row.amount, cents, `${amount} is stored as ${cents} cents`);
      assert.ok(Number.isInteger(row.amount));
    }
  });

  test('404 for an unknown terminal, and nothing is created', async () => {
    const count = await paymentRows(lipa);
    const reply = await create(client, paymentBody({ terminalId: `T-nope-${Date.now()}` }));
    assert.equal(reply.status, 404, JSON.stringify(reply.body));
    assert.equal(reply.body.error.code, 'not_found');
    assert.equal(await paymentRows(lipa), count);
  });

  test("404 for another merchant's terminal signed with this merchant's key, and nothing is created", async () => {
    const count = await paymentRows(lipa);
    const reply = await create(client, paymentBody(other, { payer: { method: 'phone', value: unregisteredPhone() } }));
    assert.equal(reply.status, 404, JSON.stringify(reply.body));
    assert.equal(reply.body.error.code, 'not_found');
    assert.equal(await paymentRows(lipa), count);
    // The owner can still use the terminal: it was a refusal, not damage.
    const own = await create(otherClient, paymentBody(other, { payer: { method: 'phone', value: unregisteredPhone() } }));
    assert.equal(own.status, 201, JSON.stringify(own.body));
  });

  test('status: 200 with the same fields and the current status', async () => {
    const payer = await createPayer(lipa);
    const created = await create(client, paymentBody(merchant, { payer: { method: 'phone', value: payer.phone } }));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const reply = await statusOf(client, created.body.paymentIdentifier);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.deepEqual(Object.keys(reply.body).sort(), FIELDS);
    assert.deepEqual(reply.body, created.body);

    // It follows the payment: the payer declines in the wallet API.
    const declined = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${created.body.paymentIdentifier}/decline`, {
      token: await payerToken(lipa, payer),
      body: {},
    });
    assert.equal(declined.status, 200, declined.text);
    const after = await statusOf(client, created.body.paymentIdentifier);
    assert.equal(after.status, 200);
    assert.equal(after.body.status, 'declined');
    assert.equal(after.body.reason, 'declined_by_payer');
    assert.equal(after.body.paymentIdentifier, created.body.paymentIdentifier);
    assert.equal(after.body.createdAt, created.body.createdAt);
    assert.ok(Date.parse(after.body.updatedAt) >= Date.parse(created.body.updatedAt));
  });

  test('status: 404 for an unknown identifier, however long, which the answer does not repeat whole', async () => {
    for (const id of [`pay_${randomBytes(16).toString('hex')}`, `pay_${'x'.repeat(5000)}`]) {
      const reply = await statusOf(client, id);
      assert.equal(reply.status, 404, JSON.stringify(reply.body));
      assert.equal(reply.body.error.code, 'not_found');
      assert.ok(reply.body.error.message.includes(id.slice(0, 36)), reply.body.error.message);
      assert.ok(reply.body.error.message.length < 150, reply.body.error.message);
    }
    const log = await call(lipa.url, 'GET', `/api/v1/callbacks?paymentIdentifier=pay_${'x'.repeat(300)}`, { token: merchant.token });
    assert.equal(log.status, 404, log.text);
    assert.ok(log.text.length < 300, log.text);
    const path = await call(lipa.url, 'GET', `/api/v1/${'x'.repeat(5000)}`);
    assert.equal(path.status, 404, path.text);
    assert.ok(path.text.length < 300, path.text);
  });

  test("status: 404 for another merchant's payment, the same answer as for an unknown one", async () => {
    const theirs = await create(otherClient, paymentBody(other, { payer: { method: 'phone', value: unregisteredPhone() } }));
    assert.equal(theirs.status, 201, JSON.stringify(theirs.body));
    const reply = await statusOf(client, theirs.body.paymentIdentifier);
    assert.equal(reply.status, 404, JSON.stringify(reply.body));
    assert.equal(reply.body.error.code, 'not_found');
    assert.ok(!JSON.stringify(reply.body).includes(theirs.body.orderId), 'nothing of the payment leaks');
    const own = await statusOf(otherClient, theirs.body.paymentIdentifier);
    assert.equal(own.status, 200);
  });
});

describe('payment request validation', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let client: LipaClient;
  const base = () => paymentBody(merchant, { payer: { method: 'phone', value: unregisteredPhone() } });

  before(async () => {
    lipa = await startLipa();
    merchant = await merchantWithPos(lipa);
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
  });

  const cases: Array<{ name: string; path: string; value: unknown; field?: string }> = [
    // Required fields, each missing in turn.
    ...['terminalId', 'currency', 'amount', 'orderId', 'payer', 'payer.method', 'payer.value', 'urls', 'urls.callbackUrl'].map((path) => ({
      name: `missing ${path}`,
      path,
      value: REMOVE,
    })),
    // Wrong types.
    { name: 'amount as a string', path: 'amount', value: '100' },
    { name: 'terminalId as a number', path: 'terminalId', value: 5 },
    { name: 'payer as a string', path: 'payer', value: 'x' },
    { name: 'amount null', path: 'amount', value: null },
    // Currency.
    { name: 'currency USD', path: 'currency', value: 'USD' },
    { name: 'currency in lower case', path: 'currency', value: 'kes' },
    // Amount.
    { name: 'amount 0', path: 'amount', value: 0 },
    { name: 'amount -1', path: 'amount', value: -1 },
    { name: 'amount with 3 decimals', path: 'amount', value: 1.005 },
    { name: 'amount over the limit', path: 'amount', value: 250000.01 },
    { name: 'amount far over the limit', path: 'amount', value: 1e21 },
    // merchantStika.
    { name: 'merchantStika with a dash', path: 'merchantStika', value: 'KES-1' },
    { name: 'merchantStika in lower case', path: 'merchantStika', value: 'kes_1' },
    { name: 'merchantStika of another currency', path: 'merchantStika', value: 'USD_123' },
    { name: 'merchantStika without digits', path: 'merchantStika', value: 'KES_' },
    // Payer.
    { name: 'payer.method email', path: 'payer.method', value: 'email' },
    { name: 'payer.value with a plus', path: 'payer.value', value: '+254708123456' },
    { name: 'payer.value with letters', path: 'payer.value', value: '2547O8123456' },
    { name: 'payer.value of 7 digits', path: 'payer.value', value: '1234567' },
    { name: 'payer.value of 16 digits', path: 'payer.value', value: '1234567890123456' },
    // URLs.
    { name: 'relative callbackUrl', path: 'urls.callbackUrl', value: '/lipa/callback' },
    { name: 'ftp callbackUrl', path: 'urls.callbackUrl', value: 'ftp://duka.example/callback' },
    { name: 'javascript: callbackUrl', path: 'urls.callbackUrl', value: 'javascript:alert(1)' },
    { name: 'callbackUrl with no host before its path', path: 'urls.callbackUrl', value: 'https:///lipa/callback' },
    { name: 'callbackUrl with a backslash for its host', path: 'urls.callbackUrl', value: 'https://\\duka.example/callback' },
    { name: 'callbackUrl on port 0', path: 'urls.callbackUrl', value: 'https://duka.example:0/callback' },
    { name: 'callbackUrl without // before its host', path: 'urls.callbackUrl', value: 'https:duka.example/callback' },
    { name: 'callbackUrl with one / before its host', path: 'urls.callbackUrl', value: 'http:/duka.example/callback' },
    { name: 'relative successRedirectUrl', path: 'urls.successRedirectUrl', value: '/thanks' },
    // Text: a reference is one line; free text may have line breaks, no other control characters.
    { name: 'orderId with a line feed', path: 'orderId', value: 'order-1\nX' },
    { name: 'orderId of spaces only', path: 'orderId', value: '   ' },
    { name: 'orderId with a NUL-like control character', path: 'orderId', value: 'order-1\u0007' },
    { name: 'orderId with a Unicode line separator', path: 'orderId', value: 'order-1\u2028X' },
    { name: 'description with an escape character', path: 'description', value: 'Two\u001b[2J items' },
    // Direction overrides and isolates reorder what follows them on the payer's screen.
    { name: 'orderId with a right-to-left override', path: 'orderId', value: 'o\u202Eabc' },
    { name: 'description with a right-to-left override', path: 'description', value: 'Refund of KES 1.00\u202E' },
    { name: 'description with a left-to-right isolate', path: 'description', value: 'Tea \u2066x\u2069' },
  ];

  for (const c of cases) {
    test(`${c.name} → 422 naming ${c.field ?? c.path}, nothing created`, async () => {
      const count = await paymentRows(lipa);
      const reply = await create(client, withField(base(), c.path, c.value));
      assertValidation(reply, c.field ?? c.path);
      assert.equal(await paymentRows(lipa), count, 'no payment row');
    });
  }

  test('several fields wrong at once → one 422 naming each of them, the first in the message', async () => {
    // A URL that is not http(s) is one of CONTRACT §6's rules too: it hides none of the others.
    const body = withField(
      withField(
        withField(withField(withField(base(), 'currency', 'USD'), 'amount', 1.005), 'payer.value', '+254708123456'),
        'description',
        'Two\u001b[2J items',
      ),
      'urls.callbackUrl',
      'ftp://shop.example/cb',
    );
    const reply = await create(client, body);
    assert.equal(reply.status, 422, JSON.stringify(reply.body));
    assert.equal(reply.body.error.code, 'validation_failed');
    const fields = (reply.body.error.details as { field: string }[]).map((d) => d.field);
    assert.deepEqual(fields, ['currency', 'amount', 'description', 'payer.value', 'urls.callbackUrl']);
    assert.equal(reply.body.error.message, `currency ${reply.body.error.details[0].message}`);
  });

  test('malformed JSON → 422, nothing created', async () => {
    const count = await paymentRows(lipa);
    const body = '{"terminalId": "T1", "amount": 10,';
    const url = new URL(CREATE, lipa.url);
    const headers = signRequest({ keyId: merchant.keyId, secret: merchant.secret, method: 'POST', url, body });
    const reply = await call(lipa.url, 'POST', CREATE, { raw: body, headers: { ...headers } });
    assert.equal(reply.status, 422, reply.text);
    assert.equal(reply.body.error.code, 'invalid_json');
    assert.equal(await paymentRows(lipa), count);
  });

  test('JSON that could be read two ways → 422 invalid_json after the signature, nothing created', async () => {
    const valid = JSON.stringify(base());
    const bodies = [
      // The amount twice: JSON.parse keeps the last, a log or an auditor may read the first.
      valid.replace('"amount":', '"amount":1,"amount":'),
      // More digits than a double keeps: it would be charged as 0.1.
      valid.replace(/"amount":[0-9.]+/, '"amount":0.10000000000000001'),
      // A lone surrogate: stored, it would come back as U+FFFD, and two orders as one.
      valid.replace(/"orderId":"([^"]+)"/, '"orderId":"$1\\ud800"'),
      valid.replace(/"orderId":"([^"]+)"/, '"orderId":"$1\\u0000"'),
    ];
    for (const body of bodies) {
      assert.notEqual(body, valid);
      const count = await paymentRows(lipa);
      const url = new URL(CREATE, lipa.url);
      const headers = signRequest({ keyId: merchant.keyId, secret: merchant.secret, method: 'POST', url, body });
      const reply = await call(lipa.url, 'POST', CREATE, { raw: body, headers: { ...headers } });
      assert.equal(reply.status, 422, `${body}: ${reply.text}`);
      assert.equal(reply.body.error.code, 'invalid_json', body);
      assert.equal(await paymentRows(lipa), count, body);
    }
    // The same digits with trailing zeros say the same amount, exactly: accepted.
    const zeros = valid.replace(/"amount":[0-9.]+/, '"amount":12.5000000000000000000');
    const headers = signRequest({
      keyId: merchant.keyId,
      secret: merchant.secret,
      method: 'POST',
      url: new URL(CREATE, lipa.url),
      body: zeros,
    });
    const accepted = await call(lipa.url, 'POST', CREATE, { raw: zeros, headers: { ...headers } });
    assert.equal(accepted.status, 201, accepted.text);
    assert.equal(accepted.body.amount, 12.5);
  });

  test('the boundaries are accepted: 8 and 15 digit phones, amount 250000, 0.01, http URLs in staging', async () => {
    for (const overrides of [
      { payer: { method: 'phone', value: '25470012' } },
      { payer: { method: 'phone', value: '254700123456789' } },
      { amount: 250000 },
      { amount: 0.01 },
      { merchantStika: 'KES_0' },
      { urls: { callbackUrl: 'http://127.0.0.1:9/cb', successRedirectUrl: 'http://duka.example/thanks' } },
    ]) {
      const reply = await create(client, { ...base(), ...overrides });
      assert.equal(reply.status, 201, `${JSON.stringify(overrides)}: ${JSON.stringify(reply.body)}`);
    }
  });
});

describe('payment requests in production', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    lipa = await startLipa({ LIPA_ENV: 'production', LIPA_MASTER_KEY: randomBytes(32).toString('hex'), MOCK_PORT: '0' });
    merchant = await merchantWithPos(lipa);
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
  });

  test('an http callbackUrl → 422 naming urls.callbackUrl, nothing created', async () => {
    const count = await paymentRows(lipa);
    const reply = await create(client, paymentBody(merchant, { urls: { callbackUrl: 'http://duka.example/cb' } }));
    assertValidation(reply, 'urls.callbackUrl');
    assert.equal(await paymentRows(lipa), count);
  });

  test('an http successRedirectUrl → 422 naming urls.successRedirectUrl', async () => {
    const reply = await create(
      client,
      paymentBody(merchant, { urls: { callbackUrl: 'https://duka.example/cb', successRedirectUrl: 'http://duka.example/thanks' } }),
    );
    assertValidation(reply, 'urls.successRedirectUrl');
  });

  test('https URLs work (201)', async () => {
    const reply = await create(
      client,
      paymentBody(merchant, { urls: { callbackUrl: 'https://duka.example/cb', successRedirectUrl: 'https://duka.example/thanks' } }),
    );
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.status, 'no_user', 'no staging test payers in production');
  });

  test('a staging test number is an ordinary payer in production: no automatic answer, no free money', async () => {
    const payer = await createPayer(lipa, { phone: '254708000001', balance: 0 });
    const reply = await create(
      client,
      paymentBody(merchant, { payer: { method: 'phone', value: payer.phone }, urls: { callbackUrl: 'https://duka.example/cb' } }),
    );
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.status, 'pending');
    // Staging's test payer would have answered after about a second.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(((await client.paymentStatus(reply.body.paymentIdentifier)).body as Payment).status, 'pending');

    await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
    const otp = await lastOtpSentTo(lipa, payer.phone);
    const token = (await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: payer.phone, otp } })).body.token;
    const accepted = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${reply.body.paymentIdentifier}/accept`, {
      token,
      body: { pin: payer.pin },
    });
    assert.equal(accepted.status, 200, accepted.text);
    assert.deepEqual(accepted.body, { status: 'declined', reason: 'insufficient_funds' }, 'no top-up in production');
  });
});

describe('payment idempotency on (terminalId, orderId)', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    lipa = await startLipa();
    merchant = await merchantWithPos(lipa);
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
  });

  test('the same body again (fresh nonce) → 200 with the same payment, nothing new stored or sent', async () => {
    const payer = await createPayer(lipa);
    const body = paymentBody(merchant, { payer: { method: 'phone', value: payer.phone } });
    const first = await create(client, body);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const count = await paymentRows(lipa);
    const prompts = (await promptsTo(lipa, payer.phone)).length;
    assert.equal(prompts, 1);

    const again = await create(client, structuredClone(body));
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body, first.body);
    // The same JSON with the keys in another order is the same body.
    const { urls, payer: payerField, ...rest } = body;
    const reordered = { urls, payer: payerField, ...rest };
    assert.notEqual(JSON.stringify(reordered), JSON.stringify(body));
    const third = await create(client, reordered);
    assert.equal(third.status, 200, JSON.stringify(third.body));
    assert.equal(third.body.paymentIdentifier, first.body.paymentIdentifier);

    assert.equal(await paymentRows(lipa), count, 'no new payment row');
    assert.equal((await promptsTo(lipa, payer.phone)).length, 1, 'no second prompt');
    const events = await lipa.ctx.store.db
      .selectFrom('callback_events')
      .select('id')
      .where('payment_id', '=', first.body.paymentIdentifier)
      .execute();
    assert.deepEqual(events, [], 'creation emits no status-change event');
  });

  test('the same (terminalId, orderId) with a different body → 409 idempotency_conflict', async () => {
    const body = paymentBody(merchant, { payer: { method: 'phone', value: unregisteredPhone() } });
    const first = await create(client, body);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const count = await paymentRows(lipa);
    const variants: Array<[string, Record<string, unknown>]> = [
      ['amount', withField(body, 'amount', 1500.51)],
      ['description', withField(body, 'description', 'Three bags of unga')],
      ['description omitted', withField(body, 'description', REMOVE)],
      ['callbackUrl', withField(body, 'urls.callbackUrl', 'http://127.0.0.1:9/other')],
      ['payer', withField(body, 'payer.value', unregisteredPhone())],
      ['merchantStika', withField(body, 'merchantStika', 'KES_999')],
    ];
    for (const [what, variant] of variants) {
      const reply = await create(client, variant);
      assert.equal(reply.status, 409, `${what}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.error.code, 'idempotency_conflict', what);
    }
    assert.equal(await paymentRows(lipa), count);
    const status = await statusOf(client, first.body.paymentIdentifier);
    assert.equal(status.body.amount, 1500.5, 'the original payment is untouched');
    assert.equal(status.body.description, 'Two bags of unga');
  });

  test('the same orderId on another terminal of the same merchant is another payment (201)', async () => {
    const pos = await call(lipa.url, 'POST', '/api/v1/points-of-sale', {
      token: merchant.token,
      body: posBody(merchant.merchantId, await categoryId(lipa)),
    });
    assert.equal(pos.status, 201, pos.text);
    const body = paymentBody(merchant, { payer: { method: 'phone', value: unregisteredPhone() } });
    const first = await create(client, body);
    const second = await create(client, { ...body, terminalId: pos.body.terminalId });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(second.status, 201, JSON.stringify(second.body));
    assert.notEqual(second.body.paymentIdentifier, first.body.paymentIdentifier);
    assert.equal(second.body.terminalId, pos.body.terminalId);
    assert.equal(second.body.orderId, first.body.orderId);
  });

  test('20 concurrent identical requests → one 201, nineteen 200, one payment', async () => {
    const body = paymentBody(merchant, { payer: { method: 'phone', value: unregisteredPhone() } });
    const replies = await Promise.all(Array.from({ length: 20 }, () => create(client, body)));
    const codes = replies.map((r) => r.status).sort();
    assert.deepEqual(codes, [...Array(19).fill(200), 201].sort(), JSON.stringify(replies.filter((r) => r.status >= 300)[0]?.body));
    assert.equal(new Set(replies.map((r) => r.body.paymentIdentifier)).size, 1);
    const rows = await lipa.ctx.store.db
      .selectFrom('payments')
      .select('id')
      .where('terminal_id', '=', merchant.terminalId)
      .where('order_id', '=', body.orderId)
      .execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.id, replies[0]?.body.paymentIdentifier);
  });

  test('10 concurrent requests with one orderId and different amounts → one 201, nine 409', async () => {
    const orderId = `race-${randomBytes(6).toString('hex')}`;
    const phone = unregisteredPhone();
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        create(client, paymentBody(merchant, { orderId, amount: 10 + i, payer: { method: 'phone', value: phone } })),
      ),
    );
    const created = replies.filter((r) => r.status === 201);
    const conflicts = replies.filter((r) => r.status === 409);
    assert.equal(created.length, 1, JSON.stringify(replies.map((r) => r.status)));
    assert.equal(conflicts.length, 9, JSON.stringify(replies.map((r) => r.status)));
    for (const reply of conflicts) assert.equal(reply.body.error.code, 'idempotency_conflict');
    const rows = await lipa.ctx.store.db.selectFrom('payments').select(['id', 'amount']).where('order_id', '=', orderId).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.id, created[0]?.body.paymentIdentifier);
    assert.equal(rows[0]?.amount, Math.round((created[0]?.body.amount ?? 0) * 100));
  });
});

describe('no_user becomes pending when the payer registers', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
    merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result`, posCompanyName: 'Kibanda Electronics' });
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('registering the phone moves the payment to pending, prompts the payer, and calls back', async () => {
    const phone = unregisteredPhone();
    const body = paymentBody(merchant, {
      amount: 75.25,
      payer: { method: 'phone', value: phone },
      urls: { callbackUrl: `${receiver.url}/cb` },
    });
    const created = await create(client, body);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'no_user');
    assert.deepEqual(await promptsTo(lipa, phone), []);
    await sleep(20);

    await createPayer(lipa, { phone });

    const status = await statusOf(client, created.body.paymentIdentifier);
    assert.equal(status.status, 200);
    assert.equal(status.body.status, 'pending');
    assert.equal(status.body.expiresAt, created.body.expiresAt, 'registering does not extend the expiry');
    assert.ok(Date.parse(status.body.updatedAt) > Date.parse(created.body.updatedAt), 'updatedAt moves');

    const prompts = await promptsTo(lipa, phone);
    assert.equal(prompts.length, 1);
    assert.ok(prompts[0]?.content.includes('Kibanda Electronics'));
    assert.ok(prompts[0]?.content.includes(body.orderId));
    assert.match(prompts[0]?.content ?? '', /75\.25/);

    const received = await receiver.waitFor(2);
    await sleep(200);
    assert.equal(receiver.received.length, 2, 'one callback per URL');
    assert.deepEqual(received.map((r) => r.path).sort(), ['/cb', '/result']);
    const events = received.map((r) => JSON.parse(r.body));
    assert.equal(events[0].eventId, events[1].eventId);
    for (const [i, event] of events.entries()) {
      assert.equal(event.eventType, 'payment.status_changed');
      assert.equal(event.payment.paymentIdentifier, created.body.paymentIdentifier);
      assert.equal(event.payment.status, 'pending');
      assert.equal(event.payment.amount, 75.25);
      assert.equal(event.payment.orderId, body.orderId);
      const callback = received[i];
      assert.ok(callback);
      assert.ok(client.verifyCallback({ url: `${receiver.url}${callback.path}`, headers: callback.headers, body: callback.body }));
    }
  });
});

describe('no_user payments expire', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    // No expiry sweep: what these tests see expired, a read has seen so (each runs a sweep itself where it needs one).
    lipa = await startLipa({ PAYMENT_TTL_SECONDS: '2' }, { expirySweep: false });
    receiver = await startReceiver();
    merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  const statusEvents = async (paymentId: string) => {
    const rows = await lipa.ctx.store.db.selectFrom('callback_events').select('payload').where('payment_id', '=', paymentId).execute();
    return rows.map((r) => JSON.parse(r.payload).payment.status as string);
  };

  test('a no_user payment expires at PAYMENT_TTL_SECONDS; registering afterwards does not revive it', async () => {
    const phone = unregisteredPhone();
    const created = await create(
      client,
      paymentBody(merchant, { payer: { method: 'phone', value: phone }, urls: { callbackUrl: `${receiver.url}/cb` } }),
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'no_user');
    assert.equal(Date.parse(created.body.expiresAt) - Date.parse(created.body.createdAt), 2000);
    const id = created.body.paymentIdentifier;

    const expired = await until('expiry', async () => {
      const reply = await statusOf(client, id);
      return reply.body.status === 'expired' ? reply.body : undefined;
    });
    assert.ok(Date.parse(expired.updatedAt) >= Date.parse(created.body.expiresAt));

    await createPayer(lipa, { phone });
    await sleep(300);
    const after = await statusOf(client, id);
    assert.equal(after.body.status, 'expired');
    assert.equal(after.body.updatedAt, expired.updatedAt);
    assert.deepEqual(await promptsTo(lipa, phone), [], 'no prompt for an expired payment');
    assert.deepEqual(await statusEvents(id), ['expired']);
    const callbacks = await receiver.waitFor(2);
    assert.deepEqual(
      callbacks.map((c) => JSON.parse(c.body).payment.status),
      ['expired', 'expired'],
    );
  });

  test('from expiresAt on, status and a repeated create answer expired, without waiting for the sweep; one event', async () => {
    for (const phone of [unregisteredPhone(), (await createPayer(lipa, { phone: unregisteredPhone() })).phone]) {
      const body = paymentBody(merchant, { payer: { method: 'phone', value: phone } });
      const created = await create(client, body);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      // No sweep runs in this service: only the reads below can expire it.
      await sleep(Math.max(0, Date.parse(created.body.expiresAt) - Date.now() + 10));
      const [status, again] = await Promise.all([statusOf(client, created.body.paymentIdentifier), create(client, body)]);
      assert.equal(status.body.status, 'expired', `${created.body.status}: ${JSON.stringify(status.body)}`);
      assert.equal(again.status, 200);
      assert.equal(again.body.status, 'expired');
      assert.ok(Date.parse(status.body.updatedAt) >= Date.parse(created.body.expiresAt));
      assert.equal(await expireDuePayments(lipa.ctx), 0, 'the sweep finds nothing left to do');
      const later = await statusOf(client, created.body.paymentIdentifier);
      assert.equal(later.body.updatedAt, status.body.updatedAt, 'the sweep found nothing left to do');
      assert.deepEqual(await statusEvents(created.body.paymentIdentifier), ['expired']);
    }
  });

  test("from expiresAt on, the merchant's and the payer's lists say expired too; one event", async () => {
    const payer = await createPayer(lipa, { phone: unregisteredPhone() });
    const token = await payerToken(lipa, payer);
    const body = paymentBody(merchant, { payer: { method: 'phone', value: payer.phone } });
    const created = await create(client, body);
    assert.equal(created.body.status, 'pending');
    const id = created.body.paymentIdentifier;
    await sleep(Math.max(0, Date.parse(created.body.expiresAt) - Date.now() + 10));
    const [merchantList, pendingList, walletList] = await Promise.all([
      call(lipa.url, 'GET', `/api/v1/payments?orderId=${body.orderId}`, { token: merchant.token }),
      call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token }),
      call(lipa.url, 'GET', '/api/v1/wallet/payments', { token }),
    ]);
    assert.deepEqual(
      merchantList.body.data.map((p: { status: string }) => p.status),
      ['expired'],
    );
    assert.deepEqual(pendingList.body.data, [], 'nothing left to approve');
    assert.equal(walletList.body.data.find((p: { paymentIdentifier: string }) => p.paymentIdentifier === id)?.status, 'expired');
    await sleep(600);
    assert.deepEqual(await statusEvents(id), ['expired']);
  });

  test('registering just after expiresAt, before the expiry sweep, does not make it pending', async () => {
    const phone = unregisteredPhone();
    const created = await create(client, paymentBody(merchant, { payer: { method: 'phone', value: phone } }));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'no_user');
    await sleep(Math.max(0, Date.parse(created.body.expiresAt) - Date.now() + 5));
    await createPayer(lipa, { phone });
    const now = await statusOf(client, created.body.paymentIdentifier);
    assert.notEqual(now.body.status, 'pending');
    await until('expiry', async () =>
      (await statusOf(client, created.body.paymentIdentifier)).body.status === 'expired' ? true : undefined,
    );
    assert.deepEqual(await statusEvents(created.body.paymentIdentifier), ['expired']);
    assert.deepEqual(await promptsTo(lipa, phone), []);
  });
});
