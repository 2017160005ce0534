import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LipaClient, Payment, PaymentRequest } from '../src/client/index.js';
import { maskPhone, successRedirect } from '../src/web/pay.js';
import {
  call,
  clientFor,
  createPayer,
  type MerchantSetup,
  merchantWithPos,
  payerToken,
  paymentBody,
  type Reply,
  unique,
} from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';

const XSS = '<script>alert(1)</script>';
const XSS_ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt;';

function assertStrictPage(reply: Reply, status = 200) {
  assert.equal(reply.status, status, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^text\/html/);
  const csp = reply.headers.get('content-security-policy') ?? '';
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /style-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.match(reply.text, /^<!doctype html>/);
  // No inline script or style: every <script> has a src, no style attributes or elements.
  assert.doesNotMatch(reply.text, /<script(?![^>]*\ssrc=)[^>]*>/);
  assert.doesNotMatch(reply.text, /<style|\sstyle=/);
}

/** The hosted payment page and the payer's wallet page (CONTRACT §10), over HTTP. */
describe('pages: /pay and /wallet', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    lipa = await startLipa();
    merchant = await merchantWithPos(lipa, { posCompanyName: 'Duka Bora Ltd' });
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
  });

  async function createPayment(setup: MerchantSetup, signer: LipaClient, overrides: Record<string, unknown> = {}): Promise<Payment> {
    const reply = await signer.createPayment(paymentBody(setup, overrides) as PaymentRequest);
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body as Payment;
  }

  async function statusUntil(id: string, expected: string) {
    const deadline = Date.now() + 8000;
    for (;;) {
      const reply = await call(lipa.url, 'GET', `/pay/${id}/status`);
      assert.equal(reply.status, 200, reply.text);
      if (reply.body.status === expected) return reply;
      assert.ok(Date.now() < deadline, `payment ${id} never became ${expected}: ${reply.text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  test('the payment page shows merchant, amount, order and a masked phone, never the full phone', async () => {
    const payer = await createPayer(lipa, { phone: '254712345678' });
    const payment = await createPayment(merchant, client, { payer: { method: 'phone', value: payer.phone } });
    assert.equal(payment.paymentUrl, `${lipa.url}/pay/${payment.paymentIdentifier}`);

    const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
    assertStrictPage(reply);
    assert.equal(reply.headers.get('x-frame-options'), 'DENY');
    assert.ok(reply.text.includes('Duka Bora Ltd'));
    assert.ok(reply.text.includes('KES 1,500.50'));
    assert.ok(reply.text.includes(payment.orderId));
    assert.ok(reply.text.includes('Two bags of unga'));
    assert.ok(reply.text.includes('2547•••••678'), 'masked phone');
    assert.ok(!reply.text.includes(payer.phone), 'the full phone never appears');
    assert.ok(!reply.text.includes('Achieng'), 'the payer name never appears');
    assert.ok(reply.text.includes('Check your phone to approve this payment.'));
    assert.ok(reply.text.includes('aria-live="polite"'));
    assert.ok(reply.text.includes('<script type="module" src="/assets/pay.js"></script>'));
    assert.ok(reply.text.includes(`data-payment="${payment.paymentIdentifier}"`));
    // The time left by the server's clock, for the page's countdown (PAYMENT_TTL_SECONDS is 120).
    const renderedLeft = Number(/data-seconds-left="(\d+)"/.exec(reply.text)?.[1]);
    assert.ok(renderedLeft > 100 && renderedLeft <= 120, `seconds left on the page: ${renderedLeft}`);

    const status = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}/status`);
    assert.equal(status.status, 200);
    assert.equal(status.headers.get('cache-control'), 'no-store');
    const { secondsLeft, ...rest } = status.body;
    assert.deepEqual(rest, {
      status: 'pending',
      message: 'Check your phone to approve this payment.',
      final: false,
      redirectUrl: null,
    });
    assert.ok(Number.isInteger(secondsLeft) && secondsLeft > 100 && secondsLeft <= renderedLeft, `secondsLeft ${secondsLeft}`);
    const left = Math.ceil((Date.parse(payment.expiresAt) - Date.now()) / 1000);
    assert.ok(Math.abs(secondsLeft - left) <= 1, `secondsLeft ${secondsLeft} counts to expiresAt (${left} s away)`);
  });

  test('a phone without a wallet is told so', async () => {
    const payment = await createPayment(merchant, client, { payer: { method: 'phone', value: '254799000111' } });
    assert.equal(payment.status, 'no_user');
    const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
    assertStrictPage(reply);
    assert.match(reply.text, /no Lipa wallet yet/);
    assert.ok(reply.text.includes('2547•••••111'));
    assert.ok(!reply.text.includes('254799000111'));
  });

  test('description, company name and order id are escaped, never raw markup', async () => {
    const evil = await merchantWithPos(lipa, { posCompanyName: XSS });
    const evilClient = clientFor(lipa.url, evil);
    const orderId = `"><img src=x onerror=alert(1)>${unique('')}`;
    const payment = await createPayment(evil, evilClient, { description: XSS, orderId });
    const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
    assertStrictPage(reply);
    assert.ok(!reply.text.includes(XSS), 'no raw <script> from user input');
    assert.ok(!reply.text.includes('<img'), 'no raw <img> from the order id');
    // Once in <title> and <h1>, once as the merchant, once as the description (at least).
    const escapedCount = reply.text.split(XSS_ESCAPED).length - 1;
    assert.ok(escapedCount >= 3, `escaped ${escapedCount} times`);
    assert.ok(reply.text.includes(`<dd id="description">${XSS_ESCAPED}</dd>`));
    assert.ok(reply.text.includes(`<dd id="merchant">${XSS_ESCAPED}</dd>`));
    assert.ok(reply.text.includes('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'));
  });

  test('an unknown payment is a 404 page with the same CSP, and a 404 status', async () => {
    const long = 'x'.repeat(201);
    for (const id of ['pay_0000000000000000000000000000000000000000000', 'nope', '%3Cscript%3Ealert(1)%3C%2Fscript%3E', long]) {
      const reply = await call(lipa.url, 'GET', `/pay/${id}`);
      assertStrictPage(reply, 404);
      assert.match(reply.text, /Payment not found/);
      assert.ok(!reply.text.includes('<script>alert'));
    }
    for (const id of ['pay_0000000000000000000000000000000000000000000', long]) {
      const status = await call(lipa.url, 'GET', `/pay/${id}/status`);
      assert.equal(status.status, 404, status.text);
      assert.equal(status.body.error.code, 'not_found');
    }
  });

  test('a page the database cannot serve is a page too: 503 with Retry-After, not a JSON body', async () => {
    const payment = await createPayment(merchant, client, { payer: { method: 'phone', value: '254799000111' } });
    const db = lipa.ctx.store.db;
    const selectFrom = db.selectFrom;
    // A disk error (SQLite's SQLITE_IOERR), which cannot be had here for real, on every read.
    db.selectFrom = (() => {
      throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
    }) as typeof db.selectFrom;
    try {
      const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
      assertStrictPage(reply, 503);
      assert.equal(reply.headers.get('retry-after'), '5');
      assert.match(reply.text, /Reload the page in a few seconds/);
    } finally {
      db.selectFrom = selectFrom;
    }
    assertStrictPage(await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`));
  });

  test('once paid, the status carries the success redirect with both parameters, keeping the existing query', async () => {
    const orderId = `order #1&x=2 ${unique('')}`;
    // A payer who answers when the test says so: the page is seen pending first, for sure.
    const payer = await createPayer(lipa, { balance: 10_000 });
    const payment = await createPayment(merchant, client, {
      orderId,
      payer: { method: 'phone', value: payer.phone },
      // The shop's own parameters as it wrote them (a signature's bytes must not change), one
      // of them with a name the payment's own replaces, and a fragment.
      urls: {
        callbackUrl: 'http://127.0.0.1:9/unused',
        successRedirectUrl: 'https://duka.example/thanks?ref=x&flag&sig=a%2Bb+c&t=~x&y=a%20b&orderId=old#done',
      },
    });
    assert.equal(payment.status, 'pending');
    const early = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}/status`);
    assert.equal(early.body.status, 'pending', early.text);
    assert.equal(early.body.redirectUrl, null, 'no redirect before paid');
    const token = await payerToken(lipa, payer);
    const accepted = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/accept`, {
      token,
      body: { pin: payer.pin },
    });
    assert.equal(accepted.status, 200, accepted.text);

    const paid = await statusUntil(payment.paymentIdentifier, 'paid');
    assert.equal(paid.body.final, true);
    assert.equal(paid.body.message, 'Payment received. Thank you!');
    assert.equal(paid.body.reason, undefined);
    assert.ok(
      paid.body.redirectUrl.startsWith(`https://duka.example/thanks?ref=x&flag&sig=a%2Bb+c&t=~x&y=a%20b&paymentIdentifier=`),
      paid.body.redirectUrl,
    );
    assert.ok(paid.body.redirectUrl.endsWith('#done'), paid.body.redirectUrl);
    const redirect = new URL(paid.body.redirectUrl);
    assert.equal(redirect.searchParams.get('paymentIdentifier'), payment.paymentIdentifier);
    assert.equal(redirect.searchParams.get('orderId'), orderId, 'the order id is encoded, not split');
    assert.deepEqual([...redirect.searchParams.keys()], ['ref', 'flag', 'sig', 't', 'y', 'paymentIdentifier', 'orderId']);

    // The page, reloaded once paid, says so and links to the same place (escaped in the attribute).
    const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
    assertStrictPage(reply);
    assert.match(reply.text, /status status-paid/);
    assert.ok(reply.text.includes(`href="${paid.body.redirectUrl.replaceAll('&', '&amp;')}"`));
  });

  test('a paid payment without successRedirectUrl has no redirect', async () => {
    const payment = await createPayment(merchant, client, {
      payer: { method: 'phone', value: '254708000001' },
      urls: { callbackUrl: 'http://127.0.0.1:9/unused' },
    });
    const paid = await statusUntil(payment.paymentIdentifier, 'paid');
    assert.equal(paid.body.redirectUrl, null);
  });

  test('a declined payment has a reason and no redirect', async () => {
    const payment = await createPayment(merchant, client, {
      payer: { method: 'phone', value: '254708000002' },
      // The shop's own parameters as it wrote them (a signature's bytes must not change), one
      // of them with a name the payment's own replaces, and a fragment.
      urls: {
        callbackUrl: 'http://127.0.0.1:9/unused',
        successRedirectUrl: 'https://duka.example/thanks?ref=x&flag&sig=a%2Bb+c&t=~x&y=a%20b&orderId=old#done',
      },
    });
    const declined = await statusUntil(payment.paymentIdentifier, 'declined');
    assert.deepEqual(declined.body, {
      status: 'declined',
      reason: 'declined_by_payer',
      message: 'The payer declined this payment.',
      final: true,
      redirectUrl: null,
      secondsLeft: null,
    });
    const reply = await call(lipa.url, 'GET', `/pay/${payment.paymentIdentifier}`);
    assertStrictPage(reply);
    assert.match(reply.text, /status status-declined/);
    assert.ok(!reply.text.includes('data-seconds-left'), 'a final payment has no time left');
    assert.ok(!reply.text.includes('duka.example/thanks'), 'the success URL is not on a declined page');
  });

  test('the wallet page is a strict shell for wallet.js', async () => {
    const reply = await call(lipa.url, 'GET', '/wallet');
    assertStrictPage(reply);
    assert.ok(reply.text.includes('<script type="module" src="/assets/wallet.js"></script>'));
    assert.ok(reply.text.includes('id="login-form"'));
    assert.ok(reply.text.includes('id="pending"'));
    assert.ok(reply.text.includes('id="history"'));
  });

  test('the page scripts are served as JavaScript; unknown assets are 404', async () => {
    for (const name of ['pay.js', 'wallet.js', 'common.js', 'dashboard-money.js']) {
      const reply = await call(lipa.url, 'GET', `/assets/${name}`);
      assert.equal(reply.status, 200, name);
      assert.match(reply.headers.get('content-type') ?? '', /^text\/javascript/, name);
      assert.ok(reply.text.length > 100);
      assert.ok(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write/.test(reply.text), `${name} never writes HTML`);
    }
    for (const name of ['nope.js', '..%2Fpay.ts', 'pay.ts']) {
      const reply = await call(lipa.url, 'GET', `/assets/${name}`);
      assert.equal(reply.status, 404, name);
      // The one error body, as for any other 404.
      assert.equal(reply.body.error.code, 'not_found', name);
      assert.equal(reply.body.requestId, reply.headers.get('x-request-id'), name);
    }
  });

  test('phones are masked to country code, first digit and the last three', () => {
    assert.equal(maskPhone('254708000001'), '2547•••••001');
    assert.equal(maskPhone('255712345678901'), '2557••••••••901');
    assert.equal(maskPhone('12345678'), '1••••678');
  });

  test('only http(s) success URLs become redirects, and only once paid', () => {
    const base = { id: 'pay_1', order_id: 'A&B', success_redirect_url: 'https://shop.example/ok?ref=x#top' };
    assert.equal(successRedirect(base, 'paid'), 'https://shop.example/ok?ref=x&paymentIdentifier=pay_1&orderId=A%26B#top');
    assert.equal(successRedirect(base, 'pending'), null);
    assert.equal(successRedirect(base, 'declined'), null);
    assert.equal(successRedirect({ ...base, success_redirect_url: null }, 'paid'), null);
    assert.equal(successRedirect({ ...base, success_redirect_url: 'javascript:alert(1)' }, 'paid'), null);
  });
});
