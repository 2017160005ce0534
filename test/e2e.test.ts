import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { LipaClient, Payment, PaymentRequest } from '../src/client/index.js';
import { assertError } from './helpers/assertions.js';
import { DESKTOP, launchBrowser, PHONE } from './helpers/browser.js';
import {
  admin,
  call,
  clientFor,
  createMerchant,
  createPayer,
  lastOtpSentTo,
  type MerchantFixture,
  type MerchantSetup,
  merchantWithPos,
  type PayerFixture,
  payerToken,
  paymentBody,
  unique,
} from './helpers/client.js';
import { ADMIN_TOKEN, type Lipa, STAGING_OTP, startLipa } from './helpers/harness.js';
import { openTill, paidPayment, requestPayment } from './helpers/money.js';
import { type Received, type Receiver, startReceiver } from './helpers/receiver.js';

/**
 * The pages end to end in real Chromium (Debian's package through playwright-core, never a
 * downloaded browser): a consumer on /pay, a payer on /wallet, a merchant on /dashboard and
 * an operator on /admin, each in its own browser context, against one running service and a
 * real HTTP server standing in for the merchant's site (callbacks and the success landing).
 *
 * LIPA_SCREENSHOTS=1 also writes docs/screenshots/{page}-{phone,desktop}.png (linked from the
 * README); without it nothing in the repository is written. The no-horizontal-scroll check
 * at 360 px runs either way.
 */

const SCREENSHOTS = process.env.LIPA_SCREENSHOTS === '1';
const SCREENSHOT_DIR = fileURLToPath(new URL('../docs/screenshots/', import.meta.url));
/** Every page state captured (and checked at phone width), in the order the README lists them. */
const EXPECTED_CAPTURES = [
  'pay-pending',
  'pay-paid',
  'wallet',
  'dashboard-payments',
  'dashboard-payment',
  'dashboard-refund',
  'dashboard-transactions',
  'admin-outbox',
];

const XSS_DESCRIPTION = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';
const XSS_COMPANY = 'Duka <b>bold</b> Ltd';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A day in Nairobi (the browsers' time zone here) as a date input holds it, `days` from today. */
const nairobiDay = (days = 0) =>
  new Intl.DateTimeFormat('en-CA', { timeZone: 'Africa/Nairobi' }).format(new Date(Date.now() + days * 86_400_000));

/** `money()` of the pages, for expected texts. */
const money = (amount: number) => `KES ${amount.toLocaleString('en-KE', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('pages end to end in Chromium', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let browser: Browser;
  let consumer: BrowserContext;
  let payerContext: BrowserContext;
  let merchantContext: BrowserContext;
  let operator: BrowserContext;

  /** Console errors and uncaught exceptions of every page, with the page's URL. */
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];
  /** Status badge texts the consumer's pages showed, as they changed (see the init script). */
  const badgeChanges: string[] = [];
  const captured: string[] = [];

  // Shared across the tests (they run in order): the approve flow's merchant and payer, and
  // the payer's wallet page, which stays signed in.
  let shop: MerchantSetup;
  let shopClient: LipaClient;
  let payer: PayerFixture;
  let wallet: Page;
  let dashboardMerchant: MerchantFixture;

  async function newContext(viewport: { width: number; height: number }): Promise<BrowserContext> {
    const context = await browser.newContext({ viewport, locale: 'en-KE', timezoneId: 'Africa/Nairobi' });
    context.setDefaultTimeout(10_000);
    context.on('page', (page) => {
      page.on('console', (message) => {
        if (message.type() === 'error') consoleErrors.push(`${page.url()}: ${message.text()}`);
      });
      page.on('pageerror', (error) => pageErrors.push(`${page.url()}: ${error.message}`));
    });
    return context;
  }

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
    browser = await launchBrowser();
    consumer = await newContext(PHONE);
    payerContext = await newContext(PHONE);
    merchantContext = await newContext(DESKTOP);
    operator = await newContext(DESKTOP);
    // Reports every change of the /pay status badge, so the flip to "Paid" is seen even when
    // the page leaves for the merchant's success URL right after it (CDP-injected: no CSP).
    await consumer.exposeFunction('lipaBadgeChanged', (text: string) => void badgeChanges.push(text));
    await consumer.addInitScript(`addEventListener('DOMContentLoaded', () => {
      const badge = document.getElementById('status-badge');
      if (badge) new MutationObserver(() => window.lipaBadgeChanged(badge.textContent)).observe(badge, { childList: true, characterData: true, subtree: true });
    });`);
    if (SCREENSHOTS) mkdirSync(SCREENSHOT_DIR, { recursive: true });

    shop = await merchantWithPos(lipa, { posCompanyName: 'Duka Bora Ltd', resultUrl: `${receiver.url}/result` });
    shopClient = clientFor(lipa.url, shop);
    payer = await createPayer(lipa, { pin: '2468', balance: 5000 });
  });

  after(async () => {
    await browser?.close();
    await receiver?.close();
    await lipa?.close();
  });

  /** Asserts the page does not scroll sideways on a 360 px phone. */
  async function assertFitsPhone(page: Page, what: string) {
    const original = page.viewportSize();
    await page.setViewportSize(PHONE);
    const width = await page.evaluate<number>('document.documentElement.scrollWidth');
    assert.ok(width <= PHONE.width, `${what} scrolls horizontally at ${PHONE.width} px: scrollWidth ${width}`);
    // Narrow screens stack table rows into cards titled by each cell's data-label (app.css).
    const unlabelled = await page.evaluate<number>(`document.querySelectorAll('.table-wrap td:not([data-label])').length`);
    assert.equal(unlabelled, 0, `${what}: every stacked table cell has its column title at ${PHONE.width} px`);
    if (original) await page.setViewportSize(original);
  }

  /** The phone-width check, and with LIPA_SCREENSHOTS=1 a full-page PNG at phone and desktop width. */
  async function capture(page: Page, name: string) {
    const original = page.viewportSize();
    await assertFitsPhone(page, name);
    if (SCREENSHOTS) {
      for (const [label, size] of [
        ['phone', PHONE],
        ['desktop', DESKTOP],
      ] as const) {
        await page.setViewportSize(size);
        await page.screenshot({
          path: join(SCREENSHOT_DIR, `${name}-${label}.png`),
          fullPage: true,
          animations: 'disabled',
          caret: 'hide',
        });
      }
    }
    if (original) await page.setViewportSize(original);
    captured.push(name);
  }

  /** The shared login form (loginFlow in common.js): login and password, then the staging OTP. */
  async function signIn(page: Page, login: string, password: string) {
    await page.locator('#login').fill(login);
    await page.locator('#password').fill(password);
    await page.getByRole('button', { name: 'Continue', exact: true }).click();
    await page.locator('#otp').fill(STAGING_OTP);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  }

  async function createPayment(client: LipaClient, setup: { terminalId: string }, overrides: Record<string, unknown>): Promise<Payment> {
    const reply = await client.createPayment(paymentBody(setup, overrides) as PaymentRequest);
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body as Payment;
  }

  /** The payer's wallet, signed in through the page (phone, PIN, staging OTP) on first use. */
  async function walletPage(): Promise<Page> {
    if (wallet) return wallet;
    const page = await payerContext.newPage();
    await page.goto(`${lipa.url}/wallet`);
    await signIn(page, payer.phone, payer.pin);
    await page.locator('#wallet').waitFor({ state: 'visible' });
    // The phone is filled in by the first GET /api/v1/wallet, a moment after the panel shows.
    await until('the phone', async () => (await page.locator('#wallet-phone').textContent()) === payer.phone);
    await until('the balance', async () => (await page.locator('#balance').textContent()) === money(5000));
    wallet = page;
    return page;
  }

  const requestCard = (page: Page, orderId: string) => page.locator('#pending article', { hasText: orderId });
  const thanksHits = (paymentIdentifier: string) =>
    receiver.received.filter((r) => r.method === 'GET' && r.path.startsWith('/thanks') && r.path.includes(paymentIdentifier));
  const callbacksFor = (paymentIdentifier: string) =>
    receiver.received.filter((r) => r.method === 'POST' && r.body.includes(`"paymentIdentifier":"${paymentIdentifier}"`));

  test('approve: the payer approves in /wallet, the consumer page flips to paid and lands on the success URL', async () => {
    const payerPage = await walletPage();
    await payerPage.locator('#pending-empty').waitFor({ state: 'visible' }); // no request is waiting yet

    const payment = await createPayment(shopClient, shop, {
      payer: { method: 'phone', value: payer.phone },
      urls: { callbackUrl: `${receiver.url}/cb`, successRedirectUrl: `${receiver.url}/thanks?ref=abc` },
    });
    assert.equal(payment.status, 'pending');
    assert.equal(payment.paymentUrl, `${lipa.url}/pay/${payment.paymentIdentifier}`);

    const page = await consumer.newPage();
    const navigations: string[] = [];
    page.on('request', (request) => {
      if (request.isNavigationRequest() && request.frame() === page.mainFrame()) navigations.push(request.url());
    });
    await page.goto(payment.paymentUrl);
    assert.equal(await page.locator('#status-badge').textContent(), 'Waiting for approval');
    assert.equal(await page.locator('#merchant').textContent(), 'Duka Bora Ltd');
    assert.equal(await page.locator('h1').textContent(), 'Pay Duka Bora Ltd');
    assert.equal(await page.locator('#amount').textContent(), 'KES 1,500.50');
    assert.equal(await page.locator('#order').textContent(), payment.orderId);
    assert.ok(!(await page.content()).includes(payer.phone), 'the full phone never shows');
    // The time left, counted down by the page (PAYMENT_TTL_SECONDS is 120).
    const countdown = async () => {
      const said = /^This request expires in (\d+):(\d\d)\.$/.exec((await page.locator('#expires').textContent()) ?? '');
      assert.ok(said, 'the page says how long is left');
      return Number(said[1]) * 60 + Number(said[2]);
    };
    const firstLeft = await countdown();
    assert.ok(firstLeft > 90 && firstLeft <= 120, `${firstLeft} s left`);
    await until('the countdown to move', async () => (await countdown()) < firstLeft, 5_000);
    await capture(page, 'pay-pending');

    // The request appears in the open wallet by itself (it refreshes every 2 s).
    const card = requestCard(payerPage, payment.orderId);
    await card.waitFor({ state: 'visible', timeout: 6000 });
    assert.equal(await card.locator('h3').textContent(), `Duka Bora Ltd requests ${money(1500.5)}`);
    assert.equal(await payerPage.locator('#pending-empty').isHidden(), true);
    await capture(payerPage, 'wallet');

    // The badge's flip to Paid is reported through a binding, and Playwright drops a report
    // that reaches it after the page has left: the landing is held until the report is in
    // (or 5 s, after which the assertion below says what was seen).
    await page.route(
      (url) => url.pathname === '/thanks',
      async (route) => {
        await until('the Paid badge reported', () => badgeChanges.includes('Paid'), 5_000).catch(() => undefined);
        await route.continue();
      },
    );
    await card.getByLabel('Wallet PIN to approve').fill(payer.pin);
    // Each card's buttons name the request they answer.
    await card.getByRole('button', { name: `Approve ${money(1500.5)} to Duka Bora Ltd, order ${payment.orderId}`, exact: true }).click();
    await until('the outcome', async () =>
      ((await payerPage.locator('#outcome').textContent()) ?? '').includes(`Paid ${money(1500.5)} to Duka Bora Ltd`),
    );
    await card.waitFor({ state: 'detached' });
    await until('the new balance', async () => (await payerPage.locator('#balance').textContent()) === money(3499.5));

    // The consumer's page, never reloaded, turns to Paid and then lands on the merchant's page.
    await page.waitForURL((url) => url.pathname === '/thanks', { timeout: 10_000 });
    const landed = new URL(page.url());
    assert.equal(landed.origin, receiver.url);
    assert.equal(landed.searchParams.get('ref'), 'abc');
    assert.equal(landed.searchParams.get('paymentIdentifier'), payment.paymentIdentifier);
    assert.equal(landed.searchParams.get('orderId'), payment.orderId);
    assert.ok(badgeChanges.includes('Paid'), `the badge showed Paid before leaving (saw ${JSON.stringify(badgeChanges)})`);
    assert.deepEqual(navigations, [payment.paymentUrl, page.url()], 'one load of /pay, then the success URL: no reload');
    const hits = thanksHits(payment.paymentIdentifier);
    assert.equal(hits.length, 1, 'the receiver recorded the landing once');
    assert.equal(`${receiver.url}${hits[0]?.path}`, page.url());
    assert.equal(await page.locator('body').textContent(), 'ok');
    await page.close();
  });

  test('decline: the payer declines, the consumer page shows declined and does not redirect', async () => {
    const payerPage = await walletPage();
    const payment = await createPayment(shopClient, shop, {
      amount: 120,
      payer: { method: 'phone', value: payer.phone },
      urls: { callbackUrl: `${receiver.url}/cb`, successRedirectUrl: `${receiver.url}/thanks?ref=declined` },
    });
    const page = await consumer.newPage();
    await page.goto(payment.paymentUrl);
    assert.equal(await page.locator('#status-badge').textContent(), 'Waiting for approval');

    const card = requestCard(payerPage, payment.orderId);
    await card.waitFor({ state: 'visible', timeout: 6000 });
    // Declining cannot be undone: the page asks first.
    const asked = new Promise<string>((resolve) =>
      payerPage.once('dialog', (dialog) => {
        resolve(dialog.message());
        void dialog.accept();
      }),
    );
    await card.getByRole('button', { name: `Decline ${money(120)} to Duka Bora Ltd, order ${payment.orderId}`, exact: true }).click();
    assert.match(await asked, /cannot be undone/);
    await until('the outcome', async () =>
      ((await payerPage.locator('#outcome').textContent()) ?? '').includes(`You declined ${money(120)} to Duka Bora Ltd`),
    );

    await until('Declined on the consumer page', async () => (await page.locator('#status-badge').textContent()) === 'Declined');
    assert.equal(await page.locator('#status-text').textContent(), 'The payer declined this payment.');
    assert.match((await page.locator('#status-badge').getAttribute('class')) ?? '', /status-declined/);
    assert.equal(await page.locator('#expires').isHidden(), true, 'no countdown once final');
    // Two more poll periods: still here, no redirect offered, and the receiver saw no landing.
    await sleep(2200);
    assert.equal(page.url(), payment.paymentUrl);
    assert.equal(await page.locator('#redirect').isHidden(), true);
    assert.equal(thanksHits(payment.paymentIdentifier).length, 0);
    assert.equal(receiver.received.filter((r) => r.path.includes('ref=declined')).length, 0);
    // The balance did not move.
    assert.equal(await payerPage.locator('#balance').textContent(), money(3499.5));
    await page.close();

    // Signing out (in another tab, its own session) ends the session on the server too: a copy
    // of its token is refused after, and the first tab's session is untouched.
    const other = await payerContext.newPage();
    await other.goto(`${lipa.url}/wallet`);
    await signIn(other, payer.phone, payer.pin);
    await other.locator('#wallet').waitFor({ state: 'visible' });
    const otherToken = await other.evaluate<string | null>(`sessionStorage.getItem('lipa.wallet.token')`);
    assert.ok(otherToken);
    await other.locator('#sign-out').click();
    await until('the token refused', async () => (await call(lipa.url, 'GET', '/api/v1/wallet', { token: otherToken })).status === 401);
    await other.close();
    const first = await payerPage.evaluate<string | null>(`sessionStorage.getItem('lipa.wallet.token')`);
    assert.equal((await call(lipa.url, 'GET', '/api/v1/wallet', { token: first ?? '' })).status, 200);
  });

  test('dashboard: the merchant creates a POS and a key, sees the payment and its callbacks, and redelivers', async () => {
    // A long name and address, as real ones are: the bar must wrap them on a phone.
    dashboardMerchant = await createMerchant(lipa, {
      name: 'Soko Safi Fresh Produce and Grocery Supplies Limited',
      login: `procurement.department.${unique('')}@soko-safi-fresh-produce.example`,
    });
    const page = await merchantContext.newPage();
    await page.goto(`${lipa.url}/dashboard`);
    await signIn(page, dashboardMerchant.login, dashboardMerchant.password);
    await page.getByRole('tab', { name: 'Points of sale' }).waitFor();
    await until('the signed-in bar', async () => ((await page.locator('#app .bar').textContent()) ?? '').includes(dashboardMerchant.login));
    assert.equal(
      await page.evaluate<string>('document.activeElement.textContent'),
      'Merchant dashboard',
      'the focus moved to the page opened',
    );

    // A point of sale through the form; its resultUrl is the receiver.
    const terminalId = unique('T-e2e-');
    await page.locator('#terminalId').fill(terminalId);
    await page.locator('#posCompanyName').fill('Soko Safi Westlands');
    await page.locator('#description').fill('Fresh produce');
    await page.locator('#categoryId').selectOption({ index: 1 });
    await page.locator('#website').fill('https://soko.example');
    await page.locator('#serverUrl').fill('https://api.soko.example');
    assert.equal(await page.locator('#merchantId').inputValue(), dashboardMerchant.merchantId, 'merchantId filled in');
    // A refusal names the field by its label, in words, marks it and puts the focus there.
    await page.locator('#resultUrl').fill('ftp://soko.example/result');
    await page.getByRole('button', { name: 'Create point of sale' }).click();
    await page.getByText('Result URL must be an absolute http(s) URL').waitFor();
    assert.equal(await page.locator('#resultUrl').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.locator('#resultUrl:focus').count(), 1, 'the focus is on the field');
    // A value the browser itself refuses: no request, and the old answer's message goes.
    await page.locator('#terminalId').fill('bad id');
    await page.getByRole('button', { name: 'Create point of sale' }).click();
    await until(
      'the stale message cleared',
      async () => (await page.getByText('Result URL must be an absolute http(s) URL').count()) === 0,
    );
    await page.locator('#terminalId').fill(terminalId);
    await page.locator('#resultUrl').fill(`${receiver.url}/dash-result`);
    await page.getByRole('button', { name: 'Create point of sale' }).click();
    await page.getByText(`Point of sale ${terminalId} created.`).waitFor();
    await page.getByRole('region', { name: 'Your points of sale' }).getByText(terminalId).waitFor();
    await assertFitsPhone(page, 'dashboard points of sale');

    // A signing key: the secret is shown once, on the page.
    await page.getByRole('tab', { name: 'Signing keys' }).click();
    await page.locator('#key-name').fill('e2e');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = ((await page.locator('#new-secret').textContent()) ?? '').trim();
    assert.match(secret, /^[0-9a-f]{64}$/);
    const heading = (await page.getByRole('region', { name: 'New key' }).locator('h3').textContent()) ?? '';
    const keyId = heading.match(/^(key_\S+) created$/)?.[1];
    assert.ok(keyId, `a key id in ${JSON.stringify(heading)}`);
    await page.getByRole('region', { name: 'Signing keys' }).getByText(keyId).waitFor();
    await assertFitsPhone(page, 'dashboard signing keys with a new secret');

    // A payment signed with that key to the staging payer that accepts after about a second;
    // no success URL, so the consumer's page stays and shows Paid.
    const client = clientFor(lipa.url, { keyId, secret });
    const payment = await createPayment(
      client,
      { terminalId },
      {
        amount: 250,
        payer: { method: 'phone', value: '254708000001' },
        urls: { callbackUrl: `${receiver.url}/dash-cb` },
      },
    );
    assert.equal(payment.status, 'pending');
    const first = await until('both callbacks', () => {
      const hits = callbacksFor(payment.paymentIdentifier);
      return hits.length >= 2 ? hits : undefined;
    });
    assert.deepEqual(first.map((c) => c.path).sort(), ['/dash-cb', '/dash-result']);
    const bodies = first.map((c) => JSON.parse(c.body));
    const eventId: string = bodies[0].eventId;
    assert.match(eventId, /^evt_/);
    assert.equal(bodies[1].eventId, eventId);
    assert.equal(bodies[0].payment.status, 'paid');
    assert.ok(
      client.verifyCallback({ url: `${receiver.url}${first[0]?.path}`, headers: first[0]?.headers ?? {}, body: first[0]?.body ?? '' }),
    );
    // The receiver answered 200; wait until the service has recorded both as delivered.
    const token = await page.evaluate<string | null>(`sessionStorage.getItem('lipa.dashboard.token')`);
    assert.ok(token, 'the dashboard keeps its token in sessionStorage');
    const deliveredTimes = async (times: number) => {
      const reply = await call(lipa.url, 'GET', `/api/v1/callbacks?paymentIdentifier=${payment.paymentIdentifier}`, { token });
      assert.equal(reply.status, 200, reply.text);
      const deliveries = reply.body.data.flatMap((e: { deliveries: { status: string; attempts: number }[] }) => e.deliveries);
      return (
        deliveries.length === 2 &&
        deliveries.every((d: { status: string; attempts: number }) => d.status === 'delivered' && d.attempts === times)
      );
    };
    await until('both deliveries recorded', () => deliveredTimes(1));

    const consumerPage = await consumer.newPage();
    await consumerPage.goto(payment.paymentUrl);
    assert.equal(await consumerPage.locator('#status-badge').textContent(), 'Paid');
    assert.equal(await consumerPage.locator('#status-text').textContent(), 'Payment received. Thank you!');
    assert.equal(await consumerPage.locator('#redirect').isHidden(), true);
    await capture(consumerPage, 'pay-paid');
    await sleep(1200);
    assert.equal(consumerPage.url(), payment.paymentUrl, 'no success URL: the page stays');
    await consumerPage.close();

    // The payments tab: the payment, paid.
    await page.getByRole('tab', { name: 'Payments' }).click();
    const detailsButton = page.getByRole('button', { name: `Details of order ${payment.orderId}` });
    await detailsButton.waitFor();
    const row = page.locator('tr', { has: detailsButton });
    assert.equal(await row.locator('[data-label="Status"]').textContent(), 'Paid', 'in words, as on the payment page');
    assert.equal(await row.locator('[data-label="Amount"]').textContent(), money(250));
    assert.equal(await row.locator('[data-label="Terminal"]').textContent(), terminalId);
    await capture(page, 'dashboard-payments');

    // Its detail: each callback attempt, delivered with HTTP 200.
    const eventSection = page.getByRole('region', { name: `Callback event ${eventId}` });
    const openDetail = async (attempts: number) => {
      await detailsButton.click();
      await eventSection.waitFor();
      const text = (await eventSection.textContent()) ?? '';
      for (const path of ['/dash-cb', '/dash-result']) assert.ok(text.includes(`${receiver.url}${path}`), `delivery to ${path} listed`);
      assert.equal(await eventSection.locator('.status-delivered').count(), 2, 'both deliveries delivered');
      const counts = (await eventSection.locator('p').allTextContents()).flatMap((p) => p.match(/ (\d+) attempts?$/)?.[1] ?? []);
      assert.deepEqual(counts, [String(attempts), String(attempts)], `${attempts} attempt(s) to each URL`);
      const codes = await eventSection.locator('[data-label="HTTP status"]').allTextContents();
      assert.deepEqual(codes, Array(2 * attempts).fill('200'));
    };
    await openDetail(1);
    assert.ok(((await page.locator('#panel').textContent()) ?? '').includes(payment.paymentIdentifier));
    await capture(page, 'dashboard-payment');

    // Redeliver: the receiver gets the same event (same eventId, same body) again at both URLs.
    await page.getByRole('button', { name: `Redeliver ${eventId}` }).click();
    await page.getByText('Sent again; refreshing…').waitFor();
    const all = await until('the redelivered callbacks', () => {
      const hits = callbacksFor(payment.paymentIdentifier);
      return hits.length >= 4 ? hits : undefined;
    });
    const again = all.filter((hit) => !first.includes(hit));
    assert.equal(again.length, 2);
    for (const hit of again) {
      assert.equal(JSON.parse(hit.body).eventId, eventId);
      const original = first.find((c: Received) => c.path === hit.path);
      assert.equal(hit.body, original?.body, `the same body again to ${hit.path}`);
    }
    await until('both redeliveries recorded', () => deliveredTimes(2));
    // The event's section was rebuilt: the focus is back on its button, which says what happened.
    await eventSection.getByText('Sent again.', { exact: true }).waitFor();
    assert.equal(await focusedLabel(page), `Redeliver ${eventId}`, 'the focus stays on the event redelivered');
    await page.getByRole('button', { name: 'Back to payments' }).click();
    await until('the list again', async () => (await focusedLabel(page)) === `Details of order ${payment.orderId}`);
    await openDetail(2);

    // Revoking the key: the list is rebuilt, and the focus goes to the line that says it is done.
    await page.getByRole('tab', { name: 'Signing keys' }).click();
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: `Revoke ${keyId}` }).click();
    const revoked = page.getByRole('status').getByText(`${keyId} revoked.`);
    await revoked.waitFor();
    assert.equal(await page.evaluate(`document.activeElement.textContent`), `${keyId} revoked.`, 'the focus is on the outcome');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You signed out.').waitFor();
    await until('the dashboard token refused', async () => (await call(lipa.url, 'GET', '/api/v1/me', { token })).status === 401);
  });

  /** The accessible label of the element that has the keyboard focus. */
  const focusedLabel = (page: Page) => page.evaluate<string | null>(`document.activeElement?.getAttribute('aria-label') ?? null`);

  test('markup in a description or company name is shown as text on /pay, /wallet and /dashboard', async () => {
    const evil = await merchantWithPos(lipa, { posCompanyName: XSS_COMPANY, resultUrl: `${receiver.url}/xss-result` });
    const evilClient = clientFor(lipa.url, evil);
    const payment = await createPayment(evilClient, evil, {
      description: XSS_DESCRIPTION,
      payer: { method: 'phone', value: payer.phone },
      urls: { callbackUrl: `${receiver.url}/xss-cb` },
    });

    const assertInert = async (page: Page, where: string) => {
      assert.equal(await page.evaluate('typeof window.__xss'), 'undefined', `no injected script ran on ${where}`);
      assert.equal(await page.locator('main img, main b, main script').count(), 0, `no injected elements on ${where}`);
    };

    // /pay
    const pay = await consumer.newPage();
    await pay.goto(payment.paymentUrl);
    assert.equal(await pay.locator('#description').textContent(), XSS_DESCRIPTION);
    assert.equal(await pay.locator('#merchant').textContent(), XSS_COMPANY);
    assert.equal(await pay.locator('h1').textContent(), `Pay ${XSS_COMPANY}`);
    assert.equal(await pay.title(), `Pay ${XSS_COMPANY} · Lipa`);
    const payText = (await pay.textContent('body')) ?? '';
    assert.ok(payText.includes(XSS_DESCRIPTION) && payText.includes(XSS_COMPANY));
    await sleep(1200); // a poll or two of pay.js
    await assertInert(pay, '/pay');

    // /wallet: the request, with the company name and description as text
    const payerPage = await walletPage();
    const card = requestCard(payerPage, payment.orderId);
    await card.waitFor({ state: 'visible', timeout: 6000 });
    assert.equal(await card.locator('h3').textContent(), `${XSS_COMPANY} requests ${money(1500.5)}`);
    assert.ok(((await card.textContent()) ?? '').includes(XSS_DESCRIPTION));
    await assertInert(payerPage, '/wallet');
    // Answer it, so the history (also rendered from the API) shows the same text.
    payerPage.once('dialog', (dialog) => void dialog.accept());
    await card.getByRole('button', { name: /^Decline / }).click();
    await until('the history row', async () => ((await payerPage.locator('#history').textContent()) ?? '').includes(XSS_DESCRIPTION));
    assert.ok(((await payerPage.locator('#history').textContent()) ?? '').includes(XSS_COMPANY));
    await assertInert(payerPage, '/wallet history');

    // /dashboard of that merchant: the POS list and the payment's detail
    const dash = await merchantContext.newPage();
    await dash.goto(`${lipa.url}/dashboard`);
    await signIn(dash, evil.login, evil.password);
    const posList = dash.getByRole('region', { name: 'Your points of sale' });
    await posList.getByText(evil.terminalId).waitFor();
    assert.ok(((await posList.textContent()) ?? '').includes(XSS_COMPANY));
    await assertInert(dash, '/dashboard points of sale');
    await dash.getByRole('tab', { name: 'Payments' }).click();
    await dash.getByRole('button', { name: `Details of order ${payment.orderId}` }).click();
    await dash.getByRole('heading', { name: `Payment for order ${payment.orderId}` }).waitFor();
    const detail = (await dash.locator('#panel').textContent()) ?? '';
    assert.ok(detail.includes(XSS_DESCRIPTION), 'the description, as text, in the detail');
    await assertInert(dash, '/dashboard payment detail');

    // No page (these or earlier ones) had a script or style refused by the CSP, or a crash.
    const csp = consoleErrors.filter((line) => /Content Security Policy|Refused/i.test(line));
    assert.deepEqual(csp, [], 'no CSP violations');
    assert.deepEqual(pageErrors, [], 'no uncaught errors in the pages');
    await Promise.all([pay.close(), dash.close()]);
  });

  test('sign-in: a double click sends one code; a new code can be sent, and the old one then fails; Start again goes back', async () => {
    const page = await payerContext.newPage();
    const otps = async () =>
      (
        (await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200')).body.data as Array<{ to: string; purpose: string; content: string }>
      ).filter((m) => m.to === payer.phone && m.purpose === 'otp');
    try {
      await page.goto(`${lipa.url}/wallet`);
      const before = (await otps()).length;
      await page.locator('#login').fill(payer.phone);
      await page.locator('#password').fill(payer.pin);
      await page.getByRole('button', { name: 'Continue', exact: true }).dblclick();
      await page.locator('#otp').waitFor({ state: 'visible' });
      assert.equal((await otps()).length, before + 1, 'one code for a double click');
      const first = /\b([0-9]{6})\b/.exec((await otps())[0]?.content ?? '')?.[1] ?? '';

      await page.getByRole('button', { name: 'Send a new code' }).click();
      await until('a second code', async () => (await otps()).length === before + 2);
      await until('the notice', async () =>
        ((await page.locator('#login-form [role=status]').textContent()) ?? '').includes('new one-time code'),
      );
      await page.locator('#otp').fill(first);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await until('the refusal', async () =>
        ((await page.locator('#login-form [role=status]').textContent()) ?? '').includes('The code is wrong, used or expired'),
      );

      await page.getByRole('button', { name: 'Start again' }).click();
      assert.equal(await page.locator('#password').isVisible(), true, 'back at the first step');
      await page.locator('#password').fill('0000');
      await page.getByRole('button', { name: 'Continue', exact: true }).click();
      await until('the page says it plainly', async () =>
        ((await page.locator('#login-form [role=status]').textContent()) ?? '').includes('The phone number or PIN is incorrect.'),
      );
    } finally {
      await page.close();
    }
  });

  test('the API explorer at /docs renders every operation under its CSP, and refuses to be framed', async () => {
    const page = await operator.newPage();
    const refused: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') refused.push(message.text());
    });
    const reply = await page.goto(`${lipa.url}/docs`);
    const headers = reply?.headers() ?? {};
    assert.match(headers['content-security-policy'] ?? '', /frame-ancestors 'none'/);
    assert.equal(headers['x-frame-options'], 'DENY');
    await page.locator('.swagger-ui .info .title').waitFor();
    const spec = (await call(lipa.url, 'GET', '/openapi.json')).body;
    const operations = Object.values(spec.paths as Record<string, object>).reduce((n, methods) => n + Object.keys(methods).length, 0);
    assert.equal(await page.locator('.opblock').count(), operations, 'every operation listed');
    assert.deepEqual(refused, [], 'nothing refused by the policy');
    await page.close();
  });

  test('admin: the operator sees merchants, payers and the outbox, OTPs newest first', async () => {
    const page = await operator.newPage();
    await page.goto(`${lipa.url}/admin`);
    assert.ok(!(await page.content()).includes(ADMIN_TOKEN), 'the page never carries the token');
    await page.locator('#admin-token').fill('not-the-token');
    await page.getByRole('button', { name: 'Open the console' }).click();
    await page.getByText('That token was refused.').waitFor();
    await page.locator('#admin-token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Open the console' }).click();

    const merchants = page.getByRole('region', { name: 'Merchants, newest first' });
    await merchants.waitFor();
    const logins = await merchants.locator('[data-label="Login"]').allTextContents();
    for (const login of [shop.login, dashboardMerchant.login]) assert.ok(logins.includes(login), `${login} listed`);
    assert.ok(logins.indexOf(dashboardMerchant.login) < logins.indexOf(shop.login), 'merchants newest first');
    await assertFitsPhone(page, 'admin merchants');

    await page.getByRole('tab', { name: 'Payers' }).click();
    const payers = page.getByRole('region', { name: 'Payers, newest first' });
    await payers.waitFor();
    const payerRow = payers.locator('tr', { hasText: payer.phone });
    const apiPayers = await admin(lipa, 'GET', '/api/v1/admin/payers?limit=200');
    const balance = apiPayers.body.data.find((p: { phone: string }) => p.phone === payer.phone)?.balance;
    assert.equal(balance, 3499.5);
    assert.equal(await payerRow.locator('[data-label="Balance"]').textContent(), money(balance));
    // Times name their zone (the browser's: Nairobi here).
    assert.match((await payerRow.locator('[data-label="Created"]').textContent()) ?? '', /\d{2}:\d{2}:\d{2} EAT$/);
    assert.ok(((await payers.textContent()) ?? '').includes('254708000001'), 'the staging payers too');
    await assertFitsPhone(page, 'admin payers');

    await page.getByRole('tab', { name: 'Outbox' }).click();
    const outbox = page.getByRole('region', { name: 'Outbox, newest first' });
    await outbox.waitFor();
    // A fresh login sends a new OTP by SMS; the open outbox shows it on top by itself (every 3 s).
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
    assert.equal(started.status, 200, started.text);
    const otp = await lastOtpSentTo(lipa, payer.phone);
    const firstRow = outbox.locator('tbody tr').first();
    await until(
      'the new OTP on top',
      async () =>
        (await firstRow.locator('[data-label="To"]').textContent()) === payer.phone &&
        ((await firstRow.locator('[data-label="Content"]').textContent()) ?? '').includes(otp),
      8000,
    );
    assert.equal(await firstRow.locator('[data-label="Type"]').textContent(), 'sms · otp');
    // The same order as the API's (newest first), and the dashboard merchant's emailed OTP further down.
    const recipients = await outbox.locator('[data-label="To"]').allTextContents();
    const apiOutbox = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=100');
    assert.deepEqual(
      recipients,
      apiOutbox.body.data.map((m: { to: string }) => m.to),
    );
    const times = apiOutbox.body.data.map((m: { createdAt: string }) => Date.parse(m.createdAt));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
      'newest first',
    );
    const types = await outbox.locator('[data-label="Type"]').allTextContents();
    const merchantOtp = recipients.findIndex((to, i) => to === dashboardMerchant.login && types[i] === 'email · otp');
    assert.ok(merchantOtp > 0, 'the merchant’s earlier OTP is listed below the new one');
    await capture(page, 'admin-outbox');
    // Paused stays paused across sections.
    await page.getByRole('button', { name: 'Auto-refresh every 3 s: on' }).click();
    await page.getByRole('tab', { name: 'Payers' }).click();
    await page.getByRole('tab', { name: 'Outbox' }).click();
    await page.getByRole('button', { name: 'Auto-refresh every 3 s: off' }).waitFor();
  });

  test('admin: the operator suspends a merchant after a confirmation, which then cannot sign in, and reinstates it', async () => {
    const merchant = await createMerchant(lipa);
    const signIn = () => call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    const page = await operator.newPage();
    try {
      await page.goto(`${lipa.url}/admin`);
      await page.locator('#admin-token').fill(ADMIN_TOKEN);
      await page.getByRole('button', { name: 'Open the console' }).click();
      const row = page.getByRole('region', { name: 'Merchants, newest first' }).locator('tr', { hasText: merchant.login });
      assert.match((await row.locator('[data-label="Standing"]').textContent()) ?? '', /^Active/);

      // Asked first: declined, nothing happens.
      page.once('dialog', (dialog) => void dialog.dismiss());
      await page.getByRole('button', { name: `Suspend ${merchant.login}` }).click();
      await sleep(300);
      assert.equal((await signIn()).status, 200, 'not suspended when the operator says no');

      page.once('dialog', (dialog) => void dialog.accept());
      await page.getByRole('button', { name: `Suspend ${merchant.login}` }).dblclick();
      await page.getByText(`${merchant.login} suspended.`).waitFor();
      assert.match((await row.locator('[data-label="Standing"]').textContent()) ?? '', /^Suspended /);
      assertError(await signIn(), 403, 'account_suspended');
      await assertFitsPhone(page, 'admin merchants with a suspended one');

      await page.getByRole('button', { name: `Reinstate ${merchant.login}` }).click();
      await page.getByText(`${merchant.login} reinstated.`).waitFor();
      assert.match((await row.locator('[data-label="Standing"]').textContent()) ?? '', /^Active/);
      assert.equal((await signIn()).status, 200);
    } finally {
      await page.close();
    }
  });

  test('a double click sends one request (a deposit, a merchant, a key); a network failure is said, not swallowed', async () => {
    const depositor = await createPayer(lipa, { balance: 1000 });
    const balanceOf = async () =>
      ((await admin(lipa, 'GET', '/api/v1/admin/payers?limit=200')).body.data as Array<{ phone: string; balance: number }>).find(
        (p) => p.phone === depositor.phone,
      )?.balance;
    const page = await operator.newPage();
    try {
      await page.goto(`${lipa.url}/admin`);
      await page.locator('#admin-token').fill(ADMIN_TOKEN);
      await page.getByRole('button', { name: 'Open the console' }).click();
      // A new merchant: one request, and the page says it was created (not a 409 from a second).
      const login = `${unique('dbl')}@shop.example`;
      await page.locator('#m-login').fill(login);
      await page.locator('#m-password').fill('correct horse battery');
      await page.locator('#m-name').fill('Double Click Ltd');
      await page.getByRole('button', { name: 'Create merchant' }).dblclick();
      await page.getByText(`Merchant ${login} created.`).waitFor();
      await sleep(300);
      assert.equal(await page.getByText(`Merchant ${login} created.`).count(), 1, 'still the success, not a 409');

      await page.getByRole('tab', { name: 'Payers' }).click();
      await page.locator('#d-phone').fill(depositor.phone);
      await page.locator('#d-amount').fill('100');
      await page.getByRole('button', { name: 'Deposit', exact: true }).dblclick();
      await page.getByText(`${depositor.phone} now has ${money(1100)}.`).waitFor();
      await sleep(300);
      assert.equal(await balanceOf(), 1100, 'one deposit for a double click');
      // A refusal names the field by its label and marks it.
      await page.locator('#d-phone').fill(depositor.phone);
      await page.locator('#d-amount').fill('20000000');
      await page.getByRole('button', { name: 'Deposit', exact: true }).click();
      await until('the refusal', async () => (await page.locator('#d-amount').getAttribute('aria-invalid')) === 'true');
      assert.equal(await page.locator('#d-amount:focus').count(), 1, 'the focus is on the field');
      await page.getByText(/^Amount \(KES\) must be/).waitFor();
      // No answer to a deposit: it may have been made, so the page does not just say "try again".
      await page.route('**/deposits', (route) => route.abort('connectionreset'));
      await page.locator('#d-amount').fill('1');
      await page.getByRole('button', { name: 'Deposit', exact: true }).click();
      await page.getByText(`No answer came: the deposit may or may not have been made. Check ${depositor.phone}'s balance below`).waitFor();
      await page.unroute('**/deposits');
    } finally {
      await page.close();
    }

    const merchant = await createMerchant(lipa);
    const dash = await merchantContext.newPage();
    try {
      await dash.goto(`${lipa.url}/dashboard`);
      await signIn(dash, merchant.login, merchant.password);
      await dash.getByRole('tab', { name: 'Signing keys' }).click();
      await dash.getByRole('button', { name: 'Create key' }).dblclick();
      await dash.locator('code').first().waitFor();
      await sleep(300);
      const token = await dash.evaluate<string | null>("sessionStorage.getItem('lipa.dashboard.token')");
      const keys = await call(lipa.url, 'GET', '/api/v1/api-keys', { token: token ?? '' });
      assert.equal(keys.body.length, 1, 'one key for a double click, its secret the one shown');
      // The service cannot be reached: the page says so.
      await dash.route('**/api/v1/api-keys', (route) => route.abort('connectionrefused'));
      await dash.getByRole('button', { name: 'Create key' }).click();
      await dash.getByText('Cannot reach Lipa. Check your connection and try again.').waitFor();
      await dash.unroute('**/api/v1/api-keys');
      // Nor does a network failure sign the merchant out: the page offers to try again.
      await dash.route('**/api/v1/me', (route) => route.abort('connectionrefused'));
      await dash.reload();
      await dash.getByRole('button', { name: 'Try again' }).waitFor();
      await dash.unroute('**/api/v1/me');
      await dash.getByRole('button', { name: 'Try again' }).click();
      await dash.getByRole('tab', { name: 'Signing keys' }).waitFor();
    } finally {
      await dash.close();
    }
    const failed = pageErrors.filter((line) => line.includes('Failed to fetch'));
    assert.deepEqual(failed, [], 'no uncaught network error');
  });

  test('dashboard: an open payment follows its payer; a late search answer is dropped; one request per Redeliver or Revoke; a fixed field is unmarked', async () => {
    const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/follow-result` });
    const buyer = await createPayer(lipa, { balance: 1000 });
    const payment = await createPayment(clientFor(lipa.url, merchant), merchant, {
      amount: 40,
      payer: { method: 'phone', value: buyer.phone },
    });
    const page = await merchantContext.newPage();
    const sent: string[] = [];
    page.on('request', (request) => {
      if (request.method() !== 'GET') sent.push(`${request.method()} ${new URL(request.url()).pathname}`);
    });
    try {
      await page.goto(`${lipa.url}/dashboard`);
      await signIn(page, merchant.login, merchant.password);
      await page.getByRole('tab', { name: 'Payments' }).click();
      await page.getByRole('button', { name: `Details of order ${payment.orderId}` }).click();
      const fields = page.locator('#panel dl.fields');
      await fields.getByText('Waiting for approval').waitFor();
      assert.ok(((await fields.textContent()) ?? '').includes('Expires'), 'an open payment shows when it expires');

      // The payer approves elsewhere: the open detail shows it without being reopened.
      const approved = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/accept`, {
        token: await payerToken(lipa, buyer),
        body: { pin: buyer.pin },
      });
      assert.equal(approved.status, 200, approved.text);
      await fields.getByText('Paid', { exact: true }).waitFor();
      assert.ok(!((await fields.textContent()) ?? '').includes('Expires'), 'a finished payment no longer shows an expiry');
      const redeliver = page.getByRole('button', { name: /^Redeliver evt_/ });
      await redeliver.waitFor();

      // A double click on Redeliver sends one request.
      await redeliver.dblclick();
      await page.getByText('Sent again.', { exact: true }).waitFor();
      assert.deepEqual(
        sent.filter((line) => line.endsWith('/redeliver')),
        [`POST /api/v1/callbacks/${(await redeliver.getAttribute('aria-label'))?.slice('Redeliver '.length)}/redeliver`],
      );

      // Searches answered out of order: the list is the last one's, not the late answer's.
      await page.getByRole('button', { name: 'Back to payments' }).click();
      await page.route(
        (url) => url.pathname === '/api/v1/payments' && url.searchParams.get('status') === 'paid',
        async (route) => {
          await sleep(1500);
          await route.continue();
        },
      );
      await page.locator('#filter-status').selectOption('paid');
      await page.locator('#filter-status').selectOption('declined');
      await page.getByText('No payments match.').waitFor();
      await sleep(2000); // the answer for "paid" has come meanwhile
      assert.equal(await page.getByText('No payments match.').count(), 1, 'the late answer did not replace the list');
      assert.equal(await page.getByRole('button', { name: `Details of order ${payment.orderId}` }).count(), 0);
      await page.unrouteAll();

      // A double click on Revoke asks once and sends one request.
      await page.getByRole('tab', { name: 'Signing keys' }).click();
      let dialogs = 0;
      page.on('dialog', (dialog) => {
        dialogs++;
        void dialog.accept();
      });
      await page.getByRole('button', { name: `Revoke ${merchant.keyId}` }).dblclick();
      await page.getByText(`${merchant.keyId} revoked.`).waitFor();
      await sleep(300);
      assert.equal(dialogs, 1, 'one question');
      assert.deepEqual(
        sent.filter((line) => line.startsWith('DELETE')),
        [`DELETE /api/v1/api-keys/${merchant.keyId}`],
      );

      // A field refused by one answer is unmarked once a later one accepts the form.
      await page.getByRole('tab', { name: 'Points of sale' }).click();
      const terminalId = unique('T-fix-');
      await page.locator('#terminalId').fill(terminalId);
      await page.locator('#posCompanyName').fill('Fixed Later Ltd');
      await page.locator('#description').fill('A form fixed and sent again');
      await page.locator('#categoryId').selectOption({ index: 1 });
      await page.locator('#website').fill('ftp://fixed.example');
      await page.locator('#serverUrl').fill('https://api.fixed.example');
      await page.locator('#resultUrl').fill(`${receiver.url}/fixed`);
      await page.getByRole('button', { name: 'Create point of sale' }).click();
      await until('the refusal', async () => (await page.locator('#website').getAttribute('aria-invalid')) === 'true');
      await page.locator('#website').fill('https://fixed.example');
      await page.getByRole('button', { name: 'Create point of sale' }).click();
      await page.getByText(`Point of sale ${terminalId} created.`).waitFor();
      assert.equal(await page.locator('[aria-invalid]').count(), 0, 'nothing is marked invalid any more');
    } finally {
      await page.close();
    }
  });

  test('dashboard money: the balance on the first screen; a paid payment refunded in part once for a double click, an over-refund refused, a pending one cancelled; the payer sees the refund', async () => {
    const till = await openTill(lipa, receiver, 10_000);
    const paid = await paidPayment(lipa, till, receiver, 250);
    const pending = await requestPayment(till, receiver, 75);
    const token = till.merchant.token;
    const balanceNow = async () => (await call(lipa.url, 'GET', '/api/v1/balance', { token })).body.available as number;
    const page = await merchantContext.newPage();
    const sent: string[] = [];
    page.on('request', (request) => {
      if (request.method() !== 'GET') sent.push(`${request.method()} ${new URL(request.url()).pathname}`);
    });
    let dialogs: string[] = [];
    let answer: 'accept' | 'dismiss' = 'accept';
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog[answer]();
    });
    try {
      await page.goto(`${lipa.url}/dashboard`);
      await signIn(page, till.merchant.login, till.merchant.password);
      // The first screen, whatever the tab: the balance, as the API says it.
      await page.getByRole('tab', { name: 'Points of sale' }).waitFor();
      assert.equal(await balanceNow(), 250);
      await until('the balance', async () => (await page.locator('#balance').textContent()) === money(250));

      await page.getByRole('tab', { name: 'Payments' }).click();
      await page.getByRole('button', { name: `Details of order ${paid.orderId}` }).click();
      const fields = page.locator('#panel dl.fields');
      await fields.getByText('Paid', { exact: true }).waitFor();
      const refunded = fields.locator('dt:text-is("Refunded") + dd');
      assert.equal(await refunded.textContent(), money(0));
      const refunds = page.getByRole('region', { name: 'Refunds of this payment, newest first' });
      await page.getByText('No refunds yet.').waitFor();
      assert.equal(
        await page.locator('#refund-amount-hint').textContent(),
        `At most ${money(250)}, what is still refundable. Empty: all of it.`,
      );

      // A part of it, with a reason; a double click asks once and refunds once.
      await page.getByLabel('Amount (KES)').fill('10');
      await page.getByLabel('Reason (optional)').fill('One crate was damaged');
      await page.getByRole('button', { name: 'Refund', exact: true }).dblclick();
      await page.getByText(`Refunded ${money(10)} to the payer.`).waitFor();
      await refunds.waitFor();
      await sleep(300);
      assert.equal(dialogs.length, 1, 'one question');
      assert.match(dialogs[0] ?? '', new RegExp(`^Refund ${money(10)} of order ${paid.orderId} to the payer\\?`));
      assert.deepEqual(
        sent.filter((line) => line.endsWith('/refunds')),
        [`POST /api/v1/payments/${paid.paymentIdentifier}/refunds`],
      );
      const apiRefunds = await call(lipa.url, 'GET', `/api/v1/payments/${paid.paymentIdentifier}/refunds`, { token });
      assert.equal(apiRefunds.body.data.length, 1, 'one refund for a double click');
      const refund = apiRefunds.body.data[0];
      assert.equal(refund.amount, 10);
      assert.equal(refund.reason, 'One crate was damaged');
      assert.equal(await refunds.locator('[data-label="Amount"]').textContent(), money(10));
      assert.equal(await refunds.locator('[data-label="Reason"]').textContent(), 'One crate was damaged');
      assert.equal(await refunds.locator('[data-label="Refund ID"]').textContent(), refund.refundIdentifier);
      await until('the refunded amount', async () => (await refunded.textContent()) === money(10));
      assert.equal(await balanceNow(), 240);
      await until('the new balance', async () => (await page.locator('#balance').textContent()) === money(240));
      assert.equal(
        await page.locator('#refund-amount-hint').textContent(),
        `At most ${money(240)}, what is still refundable. Empty: all of it.`,
      );
      assert.equal(await page.getByLabel('Amount (KES)').inputValue(), '', 'the form is cleared for the next refund');

      // More than is left: the API's words, on the field.
      dialogs = [];
      await page.getByLabel('Amount (KES)').fill('500');
      await page.getByRole('button', { name: 'Refund', exact: true }).click();
      await page.getByText('Amount (KES) must be at most 240, what is still refundable of this payment').waitFor();
      assert.equal(await page.locator('#refund-amount').getAttribute('aria-invalid'), 'true');
      assert.equal(await page.locator('#refund-amount:focus').count(), 1, 'the focus is on the field');
      assert.equal(dialogs.length, 1);
      assert.equal(await balanceNow(), 240, 'nothing moved');
      await page.getByLabel('Amount (KES)').fill('');
      await capture(page, 'dashboard-refund');

      // The pending one: Cancel asks first; no is no.
      await page.getByRole('button', { name: 'Back to payments' }).click();
      await page.getByRole('button', { name: `Details of order ${pending.orderId}` }).click();
      await fields.getByText('Waiting for approval').waitFor();
      assert.equal(await page.getByRole('button', { name: 'Refund', exact: true }).count(), 0, 'no refund of an unpaid payment');
      dialogs = [];
      answer = 'dismiss';
      await page.getByRole('button', { name: 'Cancel payment' }).click();
      await sleep(300);
      assert.equal(dialogs.length, 1);
      assert.match(dialogs[0] ?? '', /cannot be undone/);
      assert.equal(sent.filter((line) => line.endsWith('/cancel')).length, 0, 'not cancelled when the merchant says no');
      answer = 'accept';
      await page.getByRole('button', { name: 'Cancel payment' }).click();
      await page.getByText(`Cancelled: the request for ${money(75)}, order ${pending.orderId} is declined.`).waitFor();
      await fields.getByText('Declined', { exact: true }).waitFor();
      assert.ok(((await fields.textContent()) ?? '').includes('cancelled by the merchant'));
      assert.equal(await page.getByRole('button', { name: 'Cancel payment' }).count(), 0, 'nothing left to cancel');
      const cancelled = await call(lipa.url, 'GET', `/api/v1/payments?orderId=${encodeURIComponent(pending.orderId)}`, { token });
      assert.equal(cancelled.body.data[0].status, 'declined');
      assert.equal(cancelled.body.data[0].reason, 'cancelled_by_merchant');
      assert.deepEqual(
        sent.filter((line) => line.endsWith('/cancel')),
        [`POST /api/v1/payments/${pending.paymentIdentifier}/cancel`],
      );
    } finally {
      await page.close();
    }

    // The payer's wallet: the paid payment says what came back, and the balance has it.
    const context = await newContext(PHONE);
    try {
      const payerPage = await context.newPage();
      await payerPage.goto(`${lipa.url}/wallet`);
      await signIn(payerPage, till.payer.phone, till.payer.pin);
      const row = payerPage.locator('#history tr', { hasText: paid.orderId });
      await row.waitFor();
      assert.equal(await row.locator('[data-label="Amount"]').textContent(), `${money(250)}Refunded ${money(10)}`);
      assert.equal(await row.locator('.refunded').textContent(), `Refunded ${money(10)}`);
      await until('the balance', async () => (await payerPage.locator('#balance').textContent()) === money(10_000 - 250 + 10));
      await assertFitsPhone(payerPage, 'wallet with a refund');
    } finally {
      await context.close();
    }
  });

  test('dashboard transactions: newest first, a page at a time, by type and by day, and the CSV of the same filters', async () => {
    const till = await openTill(lipa, receiver, 10_000);
    const payments: Payment[] = [];
    for (let i = 1; i <= 21; i++) payments.push(await paidPayment(lipa, till, receiver, i));
    const token = till.merchant.token;
    const first = payments[0] as Payment;
    const refunded = await call(lipa.url, 'POST', `/api/v1/payments/${first.paymentIdentifier}/refunds`, {
      token,
      body: { refundReference: unique('rf-'), amount: 0.5 },
    });
    assert.equal(refunded.status, 201, refunded.text);
    const all = (await call(lipa.url, 'GET', '/api/v1/transactions', { token })).body.data as Array<{
      transactionId: string;
      type: string;
      reference: string;
    }>;
    assert.equal(all.length, 22);

    const page = await merchantContext.newPage();
    const urls: string[] = [];
    page.on('request', (request) => urls.push(request.url()));
    try {
      await page.goto(`${lipa.url}/dashboard`);
      await signIn(page, till.merchant.login, till.merchant.password);
      await page.getByRole('tab', { name: 'Transactions' }).click();
      const list = page.getByRole('region', { name: 'Transactions, newest first' });
      const references = () => list.locator('[data-label="Reference"] code').allTextContents();
      await list.waitFor();
      // Newest first, 20 a page: the refund on top.
      assert.deepEqual(
        await references(),
        all.slice(0, 20).map((t) => t.reference),
      );
      const top = list.locator('tbody tr').first();
      assert.equal(await top.locator('[data-label="Type"]').textContent(), 'Refund');
      assert.equal(await top.locator('[data-label="Amount"]').textContent(), money(-0.5));
      assert.equal(await top.locator('[data-label="Balance after"]').textContent(), money(230.5));
      assert.ok(((await top.locator('[data-label="Reference"]').textContent()) ?? '').includes(`Order ${first.orderId}`));
      await page.getByText('20 transactions so far; More reads the next ones.').waitFor();
      await page.getByRole('button', { name: 'More' }).click();
      await page.getByText('22 transactions.', { exact: true }).waitFor();
      assert.deepEqual(
        await references(),
        all.map((t) => t.reference),
        'the next page follows on, each entry once',
      );
      assert.equal(await page.getByRole('button', { name: 'More' }).count(), 0, 'no More after the last page');
      await capture(page, 'dashboard-transactions');

      // By type.
      await page.getByLabel('Type').selectOption('refund');
      await page.getByText('1 transaction.', { exact: true }).waitFor();
      assert.deepEqual(await list.locator('[data-label="Type"]').allTextContents(), ['Refund']);

      // By day: from yesterday to today (Nairobi's, the reader's) is everything; the days start at Nairobi's midnight.
      await page.getByLabel('Type').selectOption('');
      await page.getByLabel('From (day)').fill(nairobiDay(-1));
      await page.getByLabel('To (day, included)').fill(nairobiDay(0));
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByText('20 transactions so far; More reads the next ones.').waitFor();
      const asked = new URL(urls.filter((url) => new URL(url).pathname === '/api/v1/transactions').at(-1) ?? '');
      assert.equal(asked.searchParams.get('from'), new Date(`${nairobiDay(-1)}T00:00:00+03:00`).toISOString());
      assert.equal(asked.searchParams.get('to'), new Date(`${nairobiDay(1)}T00:00:00+03:00`).toISOString(), 'the last day included');
      await page.getByLabel('From (day)').fill(nairobiDay(1));
      await page.getByLabel('To (day, included)').fill('');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByText('No transactions match.').waitFor();
      // Days the wrong way round: said, and not asked.
      const before = urls.length;
      await page.getByLabel('From (day)').fill(nairobiDay(0));
      await page.getByLabel('To (day, included)').fill(nairobiDay(-1));
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByText('To (day, included) must be the same day as From or later.').waitFor();
      assert.equal(await page.locator('#tx-to').getAttribute('aria-invalid'), 'true');
      assert.equal(urls.slice(before).filter((url) => url.includes('/api/v1/transactions')).length, 0);

      // The CSV of the filters shown (payments of today), fetched with the token in a header, saved as a file.
      await page.getByLabel('Type').selectOption('payment');
      await page.getByLabel('From (day)').fill(nairobiDay(-1));
      await page.getByLabel('To (day, included)').fill('');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByText('20 transactions so far; More reads the next ones.').waitFor();
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
      assert.equal(download.suggestedFilename(), 'lipa-transactions.csv');
      const file = readFileSync((await download.path()) ?? '', 'utf8');
      const from = new Date(`${nairobiDay(-1)}T00:00:00+03:00`).toISOString();
      const direct = await call(lipa.url, 'GET', `/api/v1/transactions.csv?type=payment&from=${encodeURIComponent(from)}`, { token });
      assert.equal(direct.status, 200);
      assert.equal(file, direct.text, 'the file is the API’s CSV of the same filters');
      const lines = file.trimEnd().split('\r\n');
      assert.equal(lines[0], 'transactionId,type,amount,currency,balanceAfter,reference,orderId,occurredAt');
      const payIds = all.filter((t) => t.type === 'payment').map((t) => t.transactionId);
      assert.deepEqual(
        lines.slice(1).map((line) => line.split(',')[0]),
        payIds.reverse(),
        'every payment, oldest first',
      );
      await page.getByText('Downloaded lipa-transactions.csv.').waitFor();
      assert.ok(!urls.some((url) => url.includes(token)), 'the token is never in a URL');
    } finally {
      await page.close();
    }
  });

  test('wallet: a request answered elsewhere says what became of it; a merchant session is ended, not retried forever', async () => {
    const merchant = await merchantWithPos(lipa);
    const buyer = await createPayer(lipa, { pin: '1357', balance: 1000 });
    const payment = await createPayment(clientFor(lipa.url, merchant), merchant, {
      amount: 15,
      payer: { method: 'phone', value: buyer.phone },
    });
    const context = await newContext(PHONE);
    try {
      const page = await context.newPage();
      await page.goto(`${lipa.url}/wallet`);
      await signIn(page, buyer.phone, buyer.pin);
      const card = requestCard(page, payment.orderId);
      await card.waitFor();
      // The page's next look at its pending requests hangs, so the card stays while the
      // payment is declined elsewhere; the approval then meets a payment already declined.
      await page.route(
        (url) => url.pathname === '/api/v1/wallet/payments' && url.searchParams.get('status') === 'pending',
        () => undefined,
      );
      await sleep(2500);
      const declined = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/decline`, {
        token: await payerToken(lipa, buyer),
      });
      assert.equal(declined.status, 200, declined.text);
      await card.getByLabel('Wallet PIN to approve').fill(buyer.pin);
      await card.getByRole('button', { name: /^Approve/ }).click();
      const outcome = await until('the outcome', async () => {
        const text = (await page.locator('#outcome').textContent()) ?? '';
        return text.includes('can no longer be answered') ? text : undefined;
      });
      assert.match(outcome, /^The request from .+ for KES 15\.00 can no longer be answered: it has been declined\.$/, outcome);

      // A merchant's token in the wallet: the session is ended on the server and the page says why.
      const other = await context.newPage();
      await other.addInitScript(`sessionStorage.setItem('lipa.wallet.token', ${JSON.stringify(merchant.token)})`);
      await other.goto(`${lipa.url}/wallet`);
      await other.getByText('That is a merchant account. Merchants use /dashboard.').waitFor();
      await until(
        'the merchant token ended',
        async () => (await call(lipa.url, 'GET', '/api/v1/me', { token: merchant.token })).status === 401,
      );
    } finally {
      await context.close();
    }
  });

  test('every page state was checked at phone width (and, with LIPA_SCREENSHOTS=1, saved at both widths)', () => {
    assert.deepEqual([...captured].sort(), [...EXPECTED_CAPTURES].sort());
    if (!SCREENSHOTS) return;
    for (const name of EXPECTED_CAPTURES) {
      for (const [label, size] of [
        ['phone', PHONE],
        ['desktop', DESKTOP],
      ] as const) {
        const png = readFileSync(join(SCREENSHOT_DIR, `${name}-${label}.png`));
        assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG', `${name}-${label}.png is a PNG`);
        assert.equal(png.readUInt32BE(16), size.width, `${name}-${label}.png is ${size.width} px wide`);
      }
    }
  });
});
