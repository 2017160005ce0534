import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LipaClient, Payment } from '../src/client/index.js';
import { CONTENT_SECURITY_POLICY } from '../src/web/routes.js';
import { assertError } from './helpers/assertions.js';
import {
  admin,
  call,
  categoryId,
  clientFor,
  createPayer,
  type MerchantSetup,
  merchantWithPos,
  type PayerFixture,
  payerToken,
  paymentBody,
  posBody,
  unique,
  uniquePhone,
} from './helpers/client.js';
import { ADMIN_TOKEN, type Lipa, startLipa } from './helpers/harness.js';

async function pay(client: LipaClient, m: MerchantSetup, overrides: Record<string, unknown> = {}): Promise<Payment> {
  const reply = await client.createPayment(paymentBody(m, overrides) as never);
  assert.equal(reply.status, 201, JSON.stringify(reply.body));
  return reply.body as Payment;
}

async function messagingKey(lipa: Lipa, token: string): Promise<string> {
  const reply = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token, body: {} });
  assert.equal(reply.status, 201, reply.text);
  return reply.body.apiKey;
}

async function sendMessage(lipa: Lipa, apiKey: string, message: Record<string, unknown>): Promise<string> {
  const reply = await call(lipa.url, 'POST', '/api/messages', { body: { message }, headers: { api_key: apiKey } });
  assert.ok(reply.status === 200 || reply.status === 201, reply.text);
  return reply.body.id ?? reply.body.data.id;
}

describe('dashboard and console API', () => {
  let lipa: Lipa;
  let a: MerchantSetup;
  let b: MerchantSetup;
  let clientA: LipaClient;
  let payer: PayerFixture;
  let payerBearer: string;
  /** A's payments, oldest first: pending, no_user, declined, paid. */
  const mine: Payment[] = [];
  let theirs: Payment;

  before(async () => {
    lipa = await startLipa();
    a = await merchantWithPos(lipa);
    b = await merchantWithPos(lipa);
    clientA = clientFor(lipa.url, a);
    payer = await createPayer(lipa, { balance: 1000 });
    payerBearer = await payerToken(lipa, payer);
    const toPayer = { payer: { method: 'phone', value: payer.phone } };
    mine.push(await pay(clientA, a, { ...toPayer, amount: 12 }));
    mine.push(await pay(clientA, a, { payer: { method: 'phone', value: uniquePhone() } }));
    const declined = await pay(clientA, a, { ...toPayer, amount: 13 });
    const paid = await pay(clientA, a, { ...toPayer, amount: 14 });
    const decline = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${declined.paymentIdentifier}/decline`, { token: payerBearer });
    assert.equal(decline.status, 200, decline.text);
    const accept = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${paid.paymentIdentifier}/accept`, {
      token: payerBearer,
      body: { pin: payer.pin },
    });
    assert.equal(accept.body.status, 'paid', accept.text);
    mine.push(declined, paid);
    theirs = await pay(clientFor(lipa.url, b), b, { orderId: mine[0]?.orderId, ...toPayer });
  });
  after(() => lipa.close());

  describe('GET /api/v1/me', () => {
    test('a merchant token names the merchant', async () => {
      const reply = await call(lipa.url, 'GET', '/api/v1/me', { token: a.token });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, { type: 'merchant', id: a.merchantId, login: a.login, name: a.name });
    });

    test('a payer token names the payer', async () => {
      const reply = await call(lipa.url, 'GET', '/api/v1/me', { token: payerBearer });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, { type: 'payer', id: payer.payerId, login: payer.phone, phone: payer.phone, name: 'Achieng' });
    });

    test('no token, a bad token or the ADMIN_TOKEN: 401', async () => {
      for (const token of [undefined, 'not-a-token', ADMIN_TOKEN]) {
        const reply = await call(lipa.url, 'GET', '/api/v1/me', token ? { token } : {});
        assertError(reply, 401, 'unauthorized');
        assert.equal(reply.headers.get('www-authenticate'), 'Bearer');
      }
    });
  });

  describe('GET /api/v1/payments', () => {
    const list = (query: string, token = a.token) => call(lipa.url, 'GET', `/api/v1/payments${query}`, { token });

    test("the merchant's own payments, newest first, shaped like the status answer", async () => {
      const reply = await list('');
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(
        reply.body.map((p: Payment) => p.paymentIdentifier),
        [...mine].reverse().map((p) => p.paymentIdentifier),
      );
      assert.deepEqual(
        reply.body.map((p: Payment) => p.status),
        ['paid', 'declined', 'no_user', 'pending'],
      );
      for (const listed of reply.body as Payment[]) {
        const status = await clientA.paymentStatus(listed.paymentIdentifier);
        assert.equal(status.status, 200);
        assert.deepEqual(listed, status.body);
      }
      assert.equal(reply.body[1].reason, 'declined_by_payer');
      assert.ok(reply.body[0].paymentUrl.endsWith(`/pay/${mine[3]?.paymentIdentifier}`));
    });

    test("another merchant's payments are never listed, even with the same orderId", async () => {
      const all = await list('?limit=200');
      assert.ok(!all.body.some((p: Payment) => p.paymentIdentifier === theirs.paymentIdentifier));
      const same = await list(`?orderId=${encodeURIComponent(theirs.orderId)}`);
      assert.deepEqual(
        same.body.map((p: Payment) => p.paymentIdentifier),
        [mine[0]?.paymentIdentifier],
      );
      const bs = await list('', b.token);
      assert.deepEqual(
        bs.body.map((p: Payment) => p.paymentIdentifier),
        [theirs.paymentIdentifier],
      );
    });

    test('status filter is exact', async () => {
      for (const [status, index] of [
        ['pending', 0],
        ['no_user', 1],
        ['declined', 2],
        ['paid', 3],
      ] as const) {
        const reply = await list(`?status=${status}`);
        assert.equal(reply.status, 200, reply.text);
        assert.deepEqual(
          reply.body.map((p: Payment) => p.paymentIdentifier),
          [mine[index]?.paymentIdentifier],
          status,
        );
      }
      assert.deepEqual((await list('?status=expired')).body, []);
    });

    test('orderId search is exact, and combines with status', async () => {
      const orderId = mine[2]?.orderId ?? '';
      assert.deepEqual(
        (await list(`?orderId=${encodeURIComponent(orderId)}`)).body.map((p: Payment) => p.paymentIdentifier),
        [mine[2]?.paymentIdentifier],
      );
      assert.deepEqual((await list(`?orderId=${encodeURIComponent(orderId.slice(0, -1))}`)).body, []);
      assert.equal((await list(`?orderId=${encodeURIComponent(orderId)}&status=declined`)).body.length, 1);
      assert.equal((await list(`?orderId=${encodeURIComponent(orderId)}&status=paid`)).body.length, 0);
    });

    test('limit takes the newest; outside 1-200 or not a number is 422', async () => {
      const two = await list('?limit=2');
      assert.deepEqual(
        two.body.map((p: Payment) => p.paymentIdentifier),
        [mine[3]?.paymentIdentifier, mine[2]?.paymentIdentifier],
      );
      assert.equal((await list('?limit=200')).status, 200);
      for (const bad of ['0', '201', '999', '1000', 'ten', '-1', '1.5', '']) {
        assertError(await list(`?limit=${bad}`), 422, 'validation_failed', 'limit');
      }
      // Said in words that fit: not "must be a string" for a parameter sent twice.
      assert.deepEqual((await list('?limit=1&limit=2')).body.error.details, [{ field: 'limit', message: 'must be given once' }]);
      for (const bad of ['-1', '0', '500'])
        assert.deepEqual((await list(`?limit=${bad}`)).body.error.details, [
          { field: 'limit', message: 'must be a whole number from 1 to 200' },
        ]);
      const lost = await list('?status=lost');
      assertError(lost, 422, 'validation_failed', 'status');
      assert.deepEqual(lost.body.error.details, [
        { field: 'status', message: 'must be one of: pending, no_user, paid, declined, expired' },
      ]);
      assert.equal(lost.body.error.message, 'status must be one of: pending, no_user, paid, declined, expired');
      assertError(await list(`?orderId=${'x'.repeat(129)}`), 422, 'validation_failed', 'orderId');
    });

    test('401 without a token, 403 with a payer token', async () => {
      assertError(await call(lipa.url, 'GET', '/api/v1/payments'), 401, 'unauthorized');
      assertError(await list('', 'expired-or-made-up'), 401, 'unauthorized');
      assertError(await list('', payerBearer), 403, 'forbidden');
      assertError(await list('', ADMIN_TOKEN), 401, 'unauthorized');
    });
  });

  describe('GET /api/v1/messages', () => {
    let sent: string[];
    let foreign: string;

    before(async () => {
      const keyA = await messagingKey(lipa, a.token);
      const keyA2 = await messagingKey(lipa, a.token);
      sent = [
        await sendMessage(lipa, keyA, {
          type: 'email',
          email: 'wanjiru@example.com',
          subject: 'Receipt <b>',
          content: '<script>x</script>',
        }),
        await sendMessage(lipa, keyA2, { type: 'sms', phone: { country_code: '254', number: '712345678' }, content: 'Order 42 is ready.' }),
        await sendMessage(lipa, keyA, {
          type: 'email',
          email: 'otieno@example.com',
          subject: 'Hi',
          content: '<h1>Asante</h1>',
          content_type: 'html',
        }),
      ];
      foreign = await sendMessage(lipa, await messagingKey(lipa, b.token), {
        type: 'sms',
        phone: { country_code: '254', number: '712345679' },
        content: 'Not yours.',
      });
    });

    test('the messages the merchant sent, with any of its keys, newest first, like GET /api/messages/{id}', async () => {
      const reply = await call(lipa.url, 'GET', '/api/v1/messages', { token: a.token });
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(
        reply.body.map((m: { id: string }) => m.id),
        [...sent].reverse(),
      );
      const apiKey = await messagingKey(lipa, a.token);
      for (const listed of reply.body) {
        const lookup = await call(lipa.url, 'GET', `/api/messages/${listed.id}`, { headers: { api_key: apiKey } });
        assert.equal(lookup.status, 200, lookup.text);
        assert.deepEqual(listed, lookup.body.data);
      }
      const sms = reply.body[1];
      assert.deepEqual(sms.phone, { number: '******678', country_code: '254' });
      assert.equal(reply.body[2].content, '<script>x</script>', 'content comes back as data, unchanged');
    });

    test("never another merchant's messages, nor the service's own (OTPs, prompts)", async () => {
      const reply = await call(lipa.url, 'GET', '/api/v1/messages?limit=200', { token: a.token });
      assert.ok(!reply.body.some((m: { id: string }) => m.id === foreign));
      assert.equal(reply.body.length, sent.length);
      const theirs = await call(lipa.url, 'GET', '/api/v1/messages', { token: b.token });
      assert.deepEqual(
        theirs.body.map((m: { id: string }) => m.id),
        [foreign],
      );
    });

    test('limit; 422 outside 1-200; 401 and 403', async () => {
      const one = await call(lipa.url, 'GET', '/api/v1/messages?limit=1', { token: a.token });
      assert.deepEqual(
        one.body.map((m: { id: string }) => m.id),
        [sent[2]],
      );
      for (const bad of ['0', '201', 'x']) {
        assertError(await call(lipa.url, 'GET', `/api/v1/messages?limit=${bad}`, { token: a.token }), 422, 'validation_failed', 'limit');
      }
      assertError(await call(lipa.url, 'GET', '/api/v1/messages'), 401, 'unauthorized');
      assertError(await call(lipa.url, 'GET', '/api/v1/messages', { token: payerBearer }), 403, 'forbidden');
    });
  });

  describe('GET /api/v1/admin/merchants and /payers', () => {
    test('merchants, newest first, without passwords', async () => {
      const reply = await admin(lipa, 'GET', '/api/v1/admin/merchants');
      assert.equal(reply.status, 200, reply.text);
      const ids = reply.body.map((m: { merchantId: string }) => m.merchantId);
      assert.ok(ids.indexOf(b.merchantId) >= 0 && ids.indexOf(b.merchantId) < ids.indexOf(a.merchantId), 'B (newer) before A');
      const listed = reply.body.find((m: { merchantId: string }) => m.merchantId === a.merchantId);
      assert.deepEqual(Object.keys(listed).sort(), ['createdAt', 'login', 'merchantId', 'name', 'suspendedAt']);
      assert.equal(listed.suspendedAt, null, 'not suspended');
      assert.equal(listed.login, a.login);
      assert.equal(listed.name, a.name);
      assert.doesNotMatch(reply.text, /password/i);
      const one = await admin(lipa, 'GET', '/api/v1/admin/merchants?limit=1');
      assert.equal(one.body.length, 1);
    });

    test('payers with their wallet balance, newest first', async () => {
      const fresh = await createPayer(lipa, { balance: 0 });
      const deposit = await admin(lipa, 'POST', `/api/v1/admin/payers/${fresh.phone}/deposits`, { amount: 250.75 });
      assert.equal(deposit.status, 200, deposit.text);
      const reply = await admin(lipa, 'GET', '/api/v1/admin/payers?limit=200');
      assert.equal(reply.status, 200, reply.text);
      const phones = reply.body.map((p: { phone: string }) => p.phone);
      assert.ok(phones.indexOf(fresh.phone) < phones.indexOf(payer.phone), 'the newer payer first');
      const listed = reply.body.find((p: { phone: string }) => p.phone === fresh.phone);
      assert.deepEqual(listed, {
        payerId: fresh.payerId,
        phone: fresh.phone,
        name: 'Achieng',
        balance: 250.75,
        currency: 'KES',
        createdAt: listed.createdAt,
      });
      assert.equal(new Date(listed.createdAt).toISOString(), listed.createdAt);
      // 1000, less the 14 paid.
      assert.equal(reply.body.find((p: { phone: string }) => p.phone === payer.phone).balance, 986);
      assert.doesNotMatch(reply.text, /pin/i);
    });

    test('401 without the ADMIN_TOKEN (none, wrong, a merchant token); 422 for a bad limit', async () => {
      for (const path of ['/api/v1/admin/merchants', '/api/v1/admin/payers', '/api/v1/admin/outbox']) {
        assertError(await call(lipa.url, 'GET', path), 401, 'unauthorized');
        assertError(await call(lipa.url, 'GET', path, { token: `${ADMIN_TOKEN}x` }), 401, 'unauthorized');
        assertError(await call(lipa.url, 'GET', path, { token: a.token }), 401, 'unauthorized');
        assertError(await admin(lipa, 'GET', `${path}?limit=0`), 422, 'validation_failed', 'limit');
        assertError(await admin(lipa, 'GET', `${path}?limit=500`), 422, 'validation_failed', 'limit');
      }
    });
  });

  test('/openapi.json documents the new endpoints with their answers', async () => {
    const reply = await call(lipa.url, 'GET', '/openapi.json');
    const paths = reply.body.paths;
    for (const path of ['/api/v1/me', '/api/v1/payments', '/api/v1/messages', '/api/v1/admin/merchants', '/api/v1/admin/payers']) {
      const get = paths[path]?.get;
      assert.ok(get, `${path} is documented`);
      assert.ok(get.responses['200'], `${path} documents 200`);
      assert.ok(get.responses['401'], `${path} documents 401`);
    }
    assert.equal(paths['/dashboard'], undefined, 'pages are not API');
  });

  describe('pages', () => {
    for (const [path, script] of [
      ['/dashboard', 'dashboard.js'],
      ['/admin', 'admin.js'],
    ] as const) {
      test(`${path}: HTML with the strict CSP, its script, nothing inline, never the ADMIN_TOKEN`, async () => {
        const reply = await call(lipa.url, 'GET', path);
        assert.equal(reply.status, 200);
        assert.match(reply.headers.get('content-type') ?? '', /^text\/html/);
        assert.equal(reply.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY);
        assert.match(reply.headers.get('content-security-policy') ?? '', /script-src 'self'/);
        assert.doesNotMatch(reply.headers.get('content-security-policy') ?? '', /unsafe-inline/);
        assert.equal(reply.headers.get('x-frame-options'), 'DENY');
        assert.ok(reply.text.includes(`<script type="module" src="/assets/${script}"></script>`));
        assert.doesNotMatch(reply.text, /<script(?![^>]*\ssrc=)[^>]*>/, 'no inline script');
        assert.doesNotMatch(reply.text, /\sstyle=|<style/, 'no inline style');
        assert.doesNotMatch(reply.text, /\son[a-z]+=/i, 'no inline event handler');
        assert.ok(!reply.text.includes(ADMIN_TOKEN), 'the ADMIN_TOKEN is never in the page');
        const withToken = await call(lipa.url, 'GET', path, { token: ADMIN_TOKEN });
        assert.ok(!withToken.text.includes(ADMIN_TOKEN), 'not even for the operator');
      });

      test(`/assets/${script} is served, builds the page from text only`, async () => {
        const reply = await call(lipa.url, 'GET', `/assets/${script}`);
        assert.equal(reply.status, 200);
        assert.match(reply.headers.get('content-type') ?? '', /^text\/javascript/);
        assert.match(reply.text, /from '\.\/common\.js'/);
        assert.doesNotMatch(reply.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/);
        assert.ok(!reply.text.includes(ADMIN_TOKEN));
      });
    }

    test('/assets/common.js is served and has no HTML sinks', async () => {
      const reply = await call(lipa.url, 'GET', '/assets/common.js');
      assert.equal(reply.status, 200);
      assert.doesNotMatch(reply.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    });

    test('user text stays JSON data: a hostile company name never reaches the page HTML', async () => {
      const hostile = '<img src=x onerror=alert(1)>';
      const pos = await call(lipa.url, 'POST', '/api/v1/points-of-sale', {
        token: a.token,
        body: {
          categoryId: (await call(lipa.url, 'GET', '/api/v1/categories')).body[0].categoryId,
          posCompanyName: hostile,
          description: '"><script>alert(2)</script>',
          website: 'https://duka.example',
          resultUrl: 'https://duka.example/r',
          serverUrl: 'https://duka.example/s',
          trustAllCertificates: false,
          terminalId: unique('T'),
          merchantId: a.merchantId,
        },
      });
      assert.equal(pos.status, 201, pos.text);
      const page = await call(lipa.url, 'GET', '/dashboard', { token: a.token });
      assert.ok(!page.text.includes(hostile));
      assert.ok(!page.text.includes('alert('));
    });
  });
});

describe('the operator console in production', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ LIPA_ENV: 'production', LIPA_MASTER_KEY: randomBytes(32).toString('hex'), MOCK_PORT: '0' });
  });
  after(() => lipa.close());

  test('/admin says it needs the ADMIN_TOKEN and never contains it; the API still enforces it', async () => {
    const reply = await call(lipa.url, 'GET', '/admin');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY);
    assert.match(reply.text, /needs the ADMIN_TOKEN/);
    assert.match(reply.text, /data-env="production"/);
    assert.ok(!reply.text.includes(ADMIN_TOKEN));
    assertError(await call(lipa.url, 'GET', '/api/v1/admin/merchants'), 401, 'unauthorized');
    assert.equal((await admin(lipa, 'GET', '/api/v1/admin/merchants')).status, 200);
  });
});

describe('a merchant whose terminals share an order id', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('orderId finds it at every terminal, newest first; status and limit apply to what it found', async () => {
    const m = await merchantWithPos(lipa);
    const second = await call(lipa.url, 'POST', '/api/v1/points-of-sale', {
      token: m.token,
      body: posBody(m.merchantId, await categoryId(lipa)),
    });
    assert.equal(second.status, 201, second.text);
    const client = clientFor(lipa.url, m);
    const orderId = unique('shared-order');
    // A phone no payer has: it stays no_user (a staging test payer would pay it meanwhile).
    const first = await pay(client, m, { orderId, payer: { method: 'phone', value: uniquePhone() } });
    const payer = await createPayer(lipa, { balance: 100 });
    const later = await pay(client, { terminalId: second.body.terminalId } as MerchantSetup, {
      orderId,
      payer: { method: 'phone', value: payer.phone },
    });
    const decline = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${later.paymentIdentifier}/decline`, {
      token: await payerToken(lipa, payer),
    });
    assert.equal(decline.status, 200, decline.text);
    const list = async (query: string) => {
      const reply = await call(lipa.url, 'GET', `/api/v1/payments?orderId=${encodeURIComponent(orderId)}${query}`, { token: m.token });
      assert.equal(reply.status, 200, reply.text);
      return reply.body.map((p: Payment) => p.paymentIdentifier);
    };
    assert.deepEqual(await list(''), [later.paymentIdentifier, first.paymentIdentifier]);
    assert.deepEqual(await list('&limit=1'), [later.paymentIdentifier]);
    assert.deepEqual(await list('&status=declined'), [later.paymentIdentifier]);
    assert.deepEqual(await list('&status=declined&limit=1'), [later.paymentIdentifier]);
    assert.deepEqual(await list(`&status=${first.status}&limit=1`), [first.paymentIdentifier]);
  });
});
