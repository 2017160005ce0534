import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import type { LipaClient, Payment, PaymentRequest } from '../src/client/index.js';
import { accountId, balanceOf, checkLedger } from '../src/ledger/ledger.js';
import { expireDuePayments } from '../src/payments/expire.js';
import { assertError } from './helpers/assertions.js';
import {
  admin,
  call,
  clientFor,
  createPayer,
  type MerchantSetup,
  merchantWithPos,
  type PayerFixture,
  payerToken,
  paymentBody,
  type Reply,
  unique,
  uniquePhone,
} from './helpers/client.js';
import { type Lipa, ON_POSTGRES, startLipa } from './helpers/harness.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** The payer side (CONTRACT §6): wallet, accept with PIN, decline, races, expiry, the ledger. */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const cents = (major: number) => Math.round(major * 100);
/** Limits that would otherwise throttle a test that creates many payments or payers quickly. */
const NO_LIMITS = { RATE_LIMIT_KEY_PER_SEC: '100000', RATE_LIMIT_AUTH_IP_PER_MIN: '100000' };

interface Shop {
  merchant: MerchantSetup;
  client: LipaClient;
}

async function shop(lipa: Lipa, receiver: Receiver, posOverrides: Record<string, unknown> = {}): Promise<Shop> {
  const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result`, ...posOverrides });
  return { merchant, client: clientFor(lipa.url, merchant) };
}

/** Creates a payment of `amount` (major units) to `phone`; its callbacks go to the receiver. */
async function pay(s: Shop, receiver: Receiver, phone: string, amount: number, expected: 'pending' | 'no_user' = 'pending') {
  const body = paymentBody(s.merchant, { amount, payer: { method: 'phone', value: phone } }) as unknown as PaymentRequest;
  body.urls = { callbackUrl: `${receiver.url}/cb/${body.orderId}` };
  const created = await s.client.createPayment(body);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const payment = created.body as Payment;
  assert.equal(payment.status, expected);
  return payment;
}

async function statusOf(s: Shop, paymentId: string): Promise<Payment> {
  const reply = await s.client.paymentStatus(paymentId);
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body as Payment;
}

const accept = (lipa: Lipa, token: string, paymentId: string, pin: string) =>
  call(lipa.url, 'POST', `/api/v1/wallet/payments/${paymentId}/accept`, { token, body: { pin } });
const decline = (lipa: Lipa, token: string, paymentId: string) =>
  call(lipa.url, 'POST', `/api/v1/wallet/payments/${paymentId}/decline`, { token });

function assertNotPending(reply: Reply, what: string) {
  assert.equal(reply.status, 409, `${what}: ${reply.text}`);
  assert.equal(reply.body.error.code, 'payment_not_pending', what);
}

/** Unknown, or another payer's: one answer for both. */
function assertNotFound(reply: Reply, what: string) {
  assert.equal(reply.status, 404, `${what}: ${reply.text}`);
  assert.equal(reply.body.error.code, 'not_found', what);
}

/** A ledger account's balance in minor units (0 when it does not exist). */
async function ledger(lipa: Lipa, kind: 'wallet' | 'merchant', ownerId: string): Promise<number> {
  return (await balanceOf(lipa.ctx.store.db, accountId(kind, ownerId))) ?? 0;
}

/** What the wallet API says the payer has, in minor units. */
async function walletBalance(lipa: Lipa, token: string): Promise<number> {
  const reply = await call(lipa.url, 'GET', '/api/v1/wallet', { token });
  assert.equal(reply.status, 200, reply.text);
  return cents(reply.body.balance);
}

async function eventsFor(lipa: Lipa, paymentId: string) {
  return lipa.ctx.store.db.selectFrom('callback_events').select(['id', 'payload']).where('payment_id', '=', paymentId).execute();
}

/** Ledger transactions that paid this payment (a payment must be paid at most once). */
async function paymentTransactions(lipa: Lipa, paymentId: string): Promise<number> {
  const rows = await lipa.ctx.store.db
    .selectFrom('ledger_transactions')
    .select('id')
    .where('kind', '=', 'payment')
    .where('reference', '=', paymentId)
    .execute();
  return rows.length;
}

/**
 * The books as the postings alone say, summed here rather than by the code under test
 * (checkLedger) or from the balances it keeps: per account, per transaction, and in all.
 */
async function postedBooks(lipa: Lipa) {
  const postings = await lipa.ctx.store.db.selectFrom('ledger_postings').select(['transaction_id', 'account_id', 'amount']).execute();
  const byAccount = new Map<string, number>();
  const byTransaction = new Map<string, number>();
  for (const p of postings) {
    byAccount.set(p.account_id, (byAccount.get(p.account_id) ?? 0) + Number(p.amount));
    byTransaction.set(p.transaction_id, (byTransaction.get(p.transaction_id) ?? 0) + Number(p.amount));
  }
  return { byAccount, byTransaction, count: postings.length };
}

async function assertLedgerBalances(lipa: Lipa, note = '') {
  const check = await checkLedger(lipa.ctx.store.db);
  assert.equal(check.total, 0, `ledger total ${note}`);
  assert.deepEqual([check.mismatched, check.negative, check.unbalanced, check.statements], [[], [], [], []], `ledger check ${note}`);
  // And from the postings themselves: every transaction sums to zero, and every stored balance
  // (what the wallet API shows) is the sum of its account's postings.
  const books = await postedBooks(lipa);
  assert.ok(books.count > 0, 'there are postings to check');
  assert.deepEqual(
    [...books.byTransaction].filter(([, sum]) => sum !== 0),
    [],
    `unbalanced transactions ${note}`,
  );
  const accounts = await lipa.ctx.store.db.selectFrom('ledger_accounts').select(['id', 'balance']).execute();
  for (const account of accounts) {
    assert.equal(Number(account.balance), books.byAccount.get(account.id) ?? 0, `${account.id}: stored balance vs its postings ${note}`);
  }
}

/** Polls the status endpoint until the payment reaches one of `statuses`. */
async function waitForStatus(s: Shop, paymentId: string, statuses: string[], timeoutMs = 5000): Promise<Payment> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const payment = await statusOf(s, paymentId);
    if (statuses.includes(payment.status)) return payment;
    assert.ok(Date.now() < deadline, `payment ${paymentId} never became ${statuses.join('|')}: ${JSON.stringify(payment)}`);
    await sleep(50);
  }
}

/** The callbacks the receiver got for one payment on its callbackUrl. */
async function callbacksFor(receiver: Receiver, paymentId: string, count: number, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mine = receiver.received
      .filter((r) => r.path.startsWith('/cb/'))
      .map((r) => JSON.parse(r.body))
      .filter((b) => b.payment?.paymentIdentifier === paymentId);
    if (mine.length >= count) return mine;
    assert.ok(Date.now() < deadline, `expected ${count} callbacks for ${paymentId}, got ${mine.length}`);
    await sleep(25);
  }
}

describe('wallet: reading the wallet and its payments', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let s: Shop;

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
    s = await shop(lipa, receiver, { posCompanyName: 'Mama Mboga Ltd' });
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('GET /api/v1/wallet answers phone, balance and KES', async () => {
    const payer = await createPayer(lipa, { balance: 1234.56 });
    const reply = await call(lipa.url, 'GET', '/api/v1/wallet', { token: await payerToken(lipa, payer) });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { phone: payer.phone, balance: 1234.56, currency: 'KES' });
  });

  test("the pending list shows the payer's own payments with the POS name, and never another payer's", async () => {
    const alice = await createPayer(lipa);
    const bob = await createPayer(lipa);
    const [aliceToken, bobToken] = await Promise.all([payerToken(lipa, alice), payerToken(lipa, bob)]);
    const first = await pay(s, receiver, alice.phone, 120.5);
    const second = await pay(s, receiver, alice.phone, 7);
    const bobs = await pay(s, receiver, bob.phone, 33);

    const reply = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token: aliceToken });
    assert.equal(reply.status, 200, reply.text);
    const ids = reply.body.data.map((p: { paymentIdentifier: string }) => p.paymentIdentifier).sort();
    assert.deepEqual(ids, [first.paymentIdentifier, second.paymentIdentifier].sort(), 'exactly her two payments');
    const shown = reply.body.data.find((p: { paymentIdentifier: string }) => p.paymentIdentifier === first.paymentIdentifier);
    assert.equal(shown.merchantName, 'Mama Mboga Ltd');
    assert.equal(shown.amount, 120.5);
    assert.equal(shown.currency, 'KES');
    assert.equal(shown.orderId, first.orderId);
    assert.equal(shown.status, 'pending');
    assert.equal(shown.expiresAt, first.expiresAt);
    assert.equal(shown.refundedAmount, 0, 'nothing refunded yet');

    const noUser = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=no_user', { token: bobToken });
    assert.equal(noUser.status, 422, noUser.text);
    assert.deepEqual(noUser.body.error.details, [{ field: 'status', message: 'must be one of: pending, paid, declined, expired' }]);
    const bobsList = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token: bobToken });
    assert.deepEqual(
      bobsList.body.data.map((p: { paymentIdentifier: string }) => p.paymentIdentifier),
      [bobs.paymentIdentifier],
    );

    // Answered payments leave the pending list.
    const declined = await decline(lipa, aliceToken, second.paymentIdentifier);
    assert.equal(declined.status, 200, declined.text);
    const remaining = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token: aliceToken });
    assert.deepEqual(
      remaining.body.data.map((p: { paymentIdentifier: string }) => p.paymentIdentifier),
      [first.paymentIdentifier],
    );
  });

  test("the payer's list says how much of a paid payment the merchant refunded; it stays paid", async () => {
    const payer = await createPayer(lipa, { balance: 500 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 80);
    assert.deepEqual((await accept(lipa, token, payment.paymentIdentifier, payer.pin)).body, { status: 'paid' });
    for (const amount of [12.5, 7]) {
      const refund = await s.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: unique('rf-'), amount });
      assert.equal(refund.status, 201, JSON.stringify(refund.body));
    }
    const reply = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=paid', { token });
    assert.equal(reply.status, 200, reply.text);
    const shown = reply.body.data.find((p: { paymentIdentifier: string }) => p.paymentIdentifier === payment.paymentIdentifier);
    assert.equal(shown.status, 'paid');
    assert.equal(shown.amount, 80);
    assert.equal(shown.refundedAmount, 19.5);
    assert.deepEqual((await call(lipa.url, 'GET', '/api/v1/wallet', { token })).body.balance, 500 - 80 + 19.5);
  });

  test('a merchant token gets 403 and no token 401 on every wallet endpoint', async () => {
    const payer = await createPayer(lipa);
    const payment = await pay(s, receiver, payer.phone, 10);
    const endpoints: Array<[string, string, unknown]> = [
      ['GET', '/api/v1/wallet', undefined],
      ['GET', '/api/v1/wallet/payments?status=pending', undefined],
      ['POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/accept`, { pin: payer.pin }],
      ['POST', `/api/v1/wallet/payments/${payment.paymentIdentifier}/decline`, undefined],
    ];
    for (const [method, path, body] of endpoints) {
      assertError(await call(lipa.url, method, path, { token: s.merchant.token, body }), 403, 'forbidden');
      assertError(await call(lipa.url, method, path, { body }), 401, 'unauthorized');
    }
    assert.equal((await statusOf(s, payment.paymentIdentifier)).status, 'pending', 'nothing happened to the payment');
  });
});

describe('wallet: accept and decline', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let s: Shop;

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
    s = await shop(lipa, receiver);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('accept with the right PIN: paid, payer debited and merchant credited by exactly the amount, callback says paid', async () => {
    const payer = await createPayer(lipa, { balance: 1000 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 250.75);
    const merchantBefore = await ledger(lipa, 'merchant', s.merchant.merchantId);

    const reply = await accept(lipa, token, payment.paymentIdentifier, payer.pin);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { status: 'paid' });

    assert.equal(await walletBalance(lipa, token), 100000 - 25075);
    assert.equal(await ledger(lipa, 'wallet', payer.payerId), 100000 - 25075);
    assert.equal((await ledger(lipa, 'merchant', s.merchant.merchantId)) - merchantBefore, 25075);
    assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 1);

    const status = await statusOf(s, payment.paymentIdentifier);
    assert.equal(status.status, 'paid');
    assert.equal(status.reason, undefined);
    const [callback] = await callbacksFor(receiver, payment.paymentIdentifier, 1);
    assert.equal(callback.payment.status, 'paid');
    assert.equal(callback.payment.amount, 250.75);
    assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 1);
    await assertLedgerBalances(lipa);
  });

  test('the database itself refuses to change or delete a posting or a ledger transaction', async () => {
    const payer = await createPayer(lipa, { balance: 50 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 20);
    assert.equal((await accept(lipa, token, payment.paymentIdentifier, payer.pin)).status, 200);
    const db = lipa.ctx.store.db;
    const postings = await db.selectFrom('ledger_postings').selectAll().orderBy('id').execute();
    const transactions = await db.selectFrom('ledger_transactions').selectAll().orderBy('id').execute();
    assert.ok(postings.length >= 4 && transactions.length >= 2);
    const attempts = [
      db.updateTable('ledger_postings').set({ amount: 0 }).where('account_id', '=', accountId('wallet', payer.payerId)),
      db.deleteFrom('ledger_postings').where('transaction_id', '=', postings[0]?.transaction_id as string),
      db.updateTable('ledger_transactions').set({ reference: 'rewritten' }),
      db.deleteFrom('ledger_transactions').where('reference', '=', payment.paymentIdentifier),
    ];
    for (const attempt of attempts) await assert.rejects(attempt.execute(), /append-only/, attempt.compile().sql);
    assert.deepEqual(await db.selectFrom('ledger_postings').selectAll().orderBy('id').execute(), postings);
    assert.deepEqual(await db.selectFrom('ledger_transactions').selectAll().orderBy('id').execute(), transactions);
    await assertLedgerBalances(lipa);
  });

  test('checkLedger finds a stored balance that is not the sum of its postings', async () => {
    const payer = await createPayer(lipa, { balance: 10 });
    const db = lipa.ctx.store.db;
    const wallet = accountId('wallet', payer.payerId);
    assert.deepEqual((await checkLedger(db)).mismatched, []);
    await db.updateTable('ledger_accounts').set({ balance: sql`balance + 1` }).where('id', '=', wallet).execute();
    try {
      assert.deepEqual((await checkLedger(db)).mismatched, [wallet]);
      assert.notEqual((await checkLedger(db)).total, 0);
    } finally {
      await db.updateTable('ledger_accounts').set({ balance: sql`balance - 1` }).where('id', '=', wallet).execute();
    }
    await assertLedgerBalances(lipa);
  });

  test('accept with too little money: declined with insufficient_funds, no money moves', async () => {
    const payer = await createPayer(lipa, { balance: 99.99 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 100);
    const merchantBefore = await ledger(lipa, 'merchant', s.merchant.merchantId);

    const reply = await accept(lipa, token, payment.paymentIdentifier, payer.pin);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { status: 'declined', reason: 'insufficient_funds' });

    assert.equal(await walletBalance(lipa, token), 9999);
    assert.equal(await ledger(lipa, 'merchant', s.merchant.merchantId), merchantBefore);
    assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 0);
    const status = await statusOf(s, payment.paymentIdentifier);
    assert.equal(status.status, 'declined');
    assert.equal(status.reason, 'insufficient_funds');
    const [callback] = await callbacksFor(receiver, payment.paymentIdentifier, 1);
    assert.equal(callback.payment.status, 'declined');
    assert.equal(callback.payment.reason, 'insufficient_funds');
    assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 1);
  });

  test('an exact balance is enough: the wallet ends at zero', async () => {
    const payer = await createPayer(lipa, { balance: 42.5 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 42.5);
    const reply = await accept(lipa, token, payment.paymentIdentifier, payer.pin);
    assert.deepEqual(reply.body, { status: 'paid' });
    assert.equal(await walletBalance(lipa, token), 0);
  });

  test('decline: declined_by_payer on the status endpoint and the callback, no money moves', async () => {
    const payer = await createPayer(lipa, { balance: 500 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 20);
    const merchantBefore = await ledger(lipa, 'merchant', s.merchant.merchantId);

    const reply = await decline(lipa, token, payment.paymentIdentifier);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { status: 'declined' }, 'exactly CONTRACT §6');

    const status = await statusOf(s, payment.paymentIdentifier);
    assert.equal(status.status, 'declined');
    assert.equal(status.reason, 'declined_by_payer');
    assert.equal(await walletBalance(lipa, token), 50000);
    assert.equal(await ledger(lipa, 'merchant', s.merchant.merchantId), merchantBefore);
    assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 0);
    const [callback] = await callbacksFor(receiver, payment.paymentIdentifier, 1);
    assert.equal(callback.payment.reason, 'declined_by_payer');
  });

  test('a payment that is no longer pending (paid or declined) answers 409 payment_not_pending to accept and decline', async () => {
    const payer = await createPayer(lipa, { balance: 500 });
    const token = await payerToken(lipa, payer);
    const paid = await pay(s, receiver, payer.phone, 10);
    const declined = await pay(s, receiver, payer.phone, 10);
    const poor = await pay(s, receiver, payer.phone, 10_000);
    assert.equal((await accept(lipa, token, paid.paymentIdentifier, payer.pin)).status, 200);
    assert.equal((await decline(lipa, token, declined.paymentIdentifier)).status, 200);
    assert.equal((await accept(lipa, token, poor.paymentIdentifier, payer.pin)).body.reason, 'insufficient_funds');
    const balance = await walletBalance(lipa, token);

    for (const payment of [paid, declined, poor]) {
      assertNotPending(await accept(lipa, token, payment.paymentIdentifier, payer.pin), `accept of ${payment.paymentIdentifier}`);
      assertNotPending(await decline(lipa, token, payment.paymentIdentifier), `decline of ${payment.paymentIdentifier}`);
      assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 1, 'no second event');
    }
    assert.equal((await statusOf(s, paid.paymentIdentifier)).status, 'paid');
    assert.equal((await statusOf(s, declined.paymentIdentifier)).status, 'declined');
    assert.equal((await statusOf(s, poor.paymentIdentifier)).reason, 'insufficient_funds');
    assert.equal(await walletBalance(lipa, token), balance, 'no money moved again');
    assert.equal(await paymentTransactions(lipa, paid.paymentIdentifier), 1);
  });

  test("another payer's payment: 404 to accept and decline, as an unknown one, and it stays pending", async () => {
    const owner = await createPayer(lipa, { balance: 100 });
    const other = await createPayer(lipa, { balance: 100 });
    const otherToken = await payerToken(lipa, other);
    const payment = await pay(s, receiver, owner.phone, 10);

    const foreign = await accept(lipa, otherToken, payment.paymentIdentifier, other.pin);
    assertNotFound(foreign, "accept of another payer's payment");
    assertNotFound(await decline(lipa, otherToken, payment.paymentIdentifier), "decline of another payer's payment");
    // Word for word the answer to an id that does not exist.
    const unknown = await accept(lipa, otherToken, 'pay_doesnotexist', other.pin);
    assert.equal(
      foreign.body.error.message.replace(payment.paymentIdentifier, 'ID'),
      unknown.body.error.message.replace('pay_doesnotexist', 'ID'),
    );
    const status = await statusOf(s, payment.paymentIdentifier);
    assert.equal(status.status, 'pending');
    assert.equal(status.updatedAt, payment.updatedAt);
    assert.equal(await walletBalance(lipa, otherToken), 10000);
    assert.equal(await ledger(lipa, 'wallet', owner.payerId), 10000);
    assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 0);

    // The owner can still answer it.
    const ownerReply = await accept(lipa, await payerToken(lipa, owner), payment.paymentIdentifier, owner.pin);
    assert.deepEqual(ownerReply.body, { status: 'paid' });
  });

  test('a no_user payment becomes pending when its phone registers, is listed and can be accepted', async () => {
    const phone = uniquePhone();
    const payment = await pay(s, receiver, phone, 15, 'no_user');
    const payer = await createPayer(lipa, { phone, balance: 100 });
    const token = await payerToken(lipa, payer);
    const status = await statusOf(s, payment.paymentIdentifier);
    assert.equal(status.status, 'pending', 'no_user → pending when the payer registers before expiry (CONTRACT §6)');
    const [callback] = await callbacksFor(receiver, payment.paymentIdentifier, 1);
    assert.equal(callback.payment.status, 'pending', 'the change emits a callback');
    const list = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token });
    assert.deepEqual(
      list.body.data.map((p: { paymentIdentifier: string }) => p.paymentIdentifier),
      [payment.paymentIdentifier],
    );
    assert.deepEqual((await accept(lipa, token, payment.paymentIdentifier, payer.pin)).body, { status: 'paid' });
    assert.equal(await walletBalance(lipa, token), 8500);
  });

  test('an unknown payment answers 404', async () => {
    const payer = await createPayer(lipa);
    const token = await payerToken(lipa, payer);
    assertNotFound(await accept(lipa, token, 'pay_doesnotexist', payer.pin), 'accept of an unknown payment');
    assertNotFound(await decline(lipa, token, 'pay_doesnotexist'), 'decline of an unknown payment');
  });
});

describe('wallet: PIN', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let s: Shop;

  before(async () => {
    lipa = await startLipa();
    receiver = await startReceiver();
    s = await shop(lipa, receiver);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('a wrong PIN answers 403 invalid_pin and the payment stays pending', async () => {
    const payer = await createPayer(lipa, { pin: '1357', balance: 100 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 10);
    const reply = await accept(lipa, token, payment.paymentIdentifier, '9999');
    assert.equal(reply.status, 403, reply.text);
    assert.equal(reply.body.error.code, 'invalid_pin');
    assert.equal((await statusOf(s, payment.paymentIdentifier)).status, 'pending');
    assert.equal(await walletBalance(lipa, token), 10000);
    assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 0);
    // A wrong PIN now does not stop the right one later.
    assert.deepEqual((await accept(lipa, token, payment.paymentIdentifier, '1357')).body, { status: 'paid' });
  });

  test('an accept without a PIN, or with one that is not text, answers 422 naming pin; no guess is counted and the payment stays pending', async () => {
    const payer = await createPayer(lipa, { pin: '2468', balance: 100 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 10);
    const path = `/api/v1/wallet/payments/${payment.paymentIdentifier}/accept`;
    for (const body of [{}, { pin: 2468 }, { pin: '' }, { pin: null }]) {
      for (let i = 0; i < 3; i++) {
        const reply = await call(lipa.url, 'POST', path, { token, body });
        assert.equal(reply.status, 422, `${JSON.stringify(body)}: ${reply.text}`);
        assert.equal(reply.body.error.code, 'validation_failed');
        assert.equal(reply.body.error.details[0].field, 'pin');
      }
    }
    assert.equal((await statusOf(s, payment.paymentIdentifier)).status, 'pending');
    assert.equal(await walletBalance(lipa, token), 10000);
    // Twelve refused bodies are not twelve wrong PINs: the right one still works.
    assert.deepEqual((await accept(lipa, token, payment.paymentIdentifier, '2468')).body, { status: 'paid' });
  });

  test('after 5 wrong PINs even the right PIN answers 403 pin_locked with Retry-After; the payment stays pending', async () => {
    const payer = await createPayer(lipa, { pin: '2468', balance: 100 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 10);
    for (let i = 1; i <= 5; i++) {
      const reply = await accept(lipa, token, payment.paymentIdentifier, `000${i}`);
      assert.equal(reply.status, 403, reply.text);
      assert.equal(reply.body.error.code, 'invalid_pin', `wrong PIN #${i}`);
      // Each says how many tries are left before the lock; the 5th that the lock fell.
      assert.equal(
        reply.body.error.message,
        i < 5
          ? `Wrong PIN; ${5 - i} more wrong PIN${5 - i === 1 ? '' : 's'} and approvals are locked for 15 minutes.`
          : 'Wrong PIN; approvals are now locked for 15 minutes.',
      );
    }
    for (const pin of ['2468', '0000']) {
      const locked = await accept(lipa, token, payment.paymentIdentifier, pin);
      assert.equal(locked.status, 403, locked.text);
      assert.equal(locked.body.error.code, 'pin_locked');
      const retryAfter = Number(locked.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 15 * 60, `Retry-After ${retryAfter}`);
    }
    assert.equal((await statusOf(s, payment.paymentIdentifier)).status, 'pending');
    assert.equal(await walletBalance(lipa, token), 10000);
    // Declining needs no PIN and still works.
    assert.equal((await decline(lipa, token, payment.paymentIdentifier)).status, 200);
  });

  test('a count left over past the limit with no lock (as interrupted checks of the previous version left) heals at the next check', async () => {
    const payer = await createPayer(lipa, { pin: '1357', balance: 100 });
    const token = await payerToken(lipa, payer);
    const first = await pay(s, receiver, payer.phone, 10);
    const second = await pay(s, receiver, payer.phone, 10);
    const stuck = () =>
      lipa.ctx.store.write((tx) =>
        tx.updateTable('payers').set({ pin_failures: 229, pin_locked_until: 0 }).where('phone', '=', payer.phone).execute(),
      );
    const row = () =>
      lipa.ctx.store.db
        .selectFrom('payers')
        .select(['pin_failures', 'pin_locked_until'])
        .where('phone', '=', payer.phone)
        .executeTakeFirstOrThrow();
    // The right PIN approves, and clears the count.
    await stuck();
    assert.deepEqual((await accept(lipa, token, first.paymentIdentifier, '1357')).body, { status: 'paid' });
    assert.equal((await row()).pin_failures, 0);
    // A wrong one locks approvals for 15 minutes, a lock with an end; the count starts again.
    await stuck();
    const wrong = await accept(lipa, token, second.paymentIdentifier, '0000');
    assert.equal(wrong.body.error.message, 'Wrong PIN; approvals are now locked for 15 minutes.', wrong.text);
    const locked = await accept(lipa, token, second.paymentIdentifier, '1357');
    assert.equal(locked.body.error.code, 'pin_locked', locked.text);
    const retryAfter = Number(locked.headers.get('retry-after'));
    assert.ok(retryAfter > 14 * 60 && retryAfter <= 15 * 60, `Retry-After ${retryAfter}`);
    assert.equal((await row()).pin_failures, 0);
    // When the lock has run out (moved into the past here), five fresh tries.
    await lipa.ctx.store.write((tx) =>
      tx
        .updateTable('payers')
        .set({ pin_locked_until: Date.now() - 1 })
        .where('phone', '=', payer.phone)
        .execute(),
    );
    const again = await accept(lipa, token, second.paymentIdentifier, '0000');
    assert.equal(again.body.error.message, 'Wrong PIN; 4 more wrong PINs and approvals are locked for 15 minutes.', again.text);
    assert.deepEqual((await accept(lipa, token, second.paymentIdentifier, '1357')).body, { status: 'paid' });
  });

  test('wrong PINs sent concurrently cannot get past the lock: at most 5 guesses are judged', async () => {
    const payer = await createPayer(lipa, { pin: '8642', balance: 100 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 10);
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) => accept(lipa, token, payment.paymentIdentifier, String(1000 + i).padStart(4, '0'))),
    );
    const codes = replies.map((r) => `${r.status} ${r.body?.error?.code}`);
    assert.ok(
      codes.every((c) => c === '403 invalid_pin' || c === '403 pin_locked'),
      codes.join(', '),
    );
    const judged = codes.filter((c) => c === '403 invalid_pin').length;
    assert.ok(judged <= 5, `${judged} of 12 concurrent wrong PINs were judged (invalid_pin) instead of at most 5: a brute-force bypass`);
    const rightPin = await accept(lipa, token, payment.paymentIdentifier, '8642');
    assert.equal(rightPin.status, 403, `the right PIN after 12 wrong ones: ${rightPin.text}`);
    assert.equal(rightPin.body.error.code, 'pin_locked');
    assert.equal((await statusOf(s, payment.paymentIdentifier)).status, 'pending');
  });
});

describe('wallet: races', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let s: Shop;

  before(async () => {
    lipa = await startLipa(NO_LIMITS);
    receiver = await startReceiver();
    s = await shop(lipa, receiver);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('20 concurrent accepts and declines on one payment: exactly one 200, the rest 409, money moved at most once, one event', async () => {
    const payer = await createPayer(lipa, { balance: 1000 });
    const token = await payerToken(lipa, payer);
    let expectedWallet = 100000;
    let expectedMerchant = await ledger(lipa, 'merchant', s.merchant.merchantId);
    for (let round = 0; round < 3; round++) {
      const payment = await pay(s, receiver, payer.phone, 100);
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i + round) % 2 === 0
            ? accept(lipa, token, payment.paymentIdentifier, payer.pin)
            : decline(lipa, token, payment.paymentIdentifier),
        ),
      );
      const ok = replies.filter((r) => r.status === 200);
      assert.equal(ok.length, 1, `round ${round}: ${replies.map((r) => r.status).join(',')}`);
      for (const r of replies.filter((r) => r.status !== 200)) assertNotPending(r, `round ${round} loser`);
      const winner = ok[0]?.body.status;
      const status = await statusOf(s, payment.paymentIdentifier);
      assert.equal(status.status, winner, `round ${round}: the status is what the winner was told`);
      if (winner === 'paid') {
        expectedWallet -= 10000;
        expectedMerchant += 10000;
      } else {
        assert.equal(status.reason, 'declined_by_payer');
      }
      assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), winner === 'paid' ? 1 : 0, `round ${round}`);
      assert.equal(await ledger(lipa, 'wallet', payer.payerId), expectedWallet, `round ${round}: wallet`);
      assert.equal(await walletBalance(lipa, token), expectedWallet, `round ${round}: wallet API`);
      assert.equal(await ledger(lipa, 'merchant', s.merchant.merchantId), expectedMerchant, `round ${round}: merchant`);
      assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 1, `round ${round}: one event`);
    }
    await assertLedgerBalances(lipa);
  });

  test('concurrent accepts of different payments cannot overdraw the wallet', async () => {
    const payer = await createPayer(lipa, { balance: 250 });
    const token = await payerToken(lipa, payer);
    const merchantBefore = await ledger(lipa, 'merchant', s.merchant.merchantId);
    const payments = [];
    for (let i = 0; i < 10; i++) payments.push(await pay(s, receiver, payer.phone, 100));
    const replies = await Promise.all(payments.map((p) => accept(lipa, token, p.paymentIdentifier, payer.pin)));
    assert.ok(
      replies.every((r) => r.status === 200),
      replies.map((r) => r.text).join('\n'),
    );
    const paid = replies.filter((r) => r.body.status === 'paid').length;
    const poor = replies.filter((r) => r.body.reason === 'insufficient_funds').length;
    assert.deepEqual([paid, poor], [2, 8], 'two of 100 fit into 250, the others are declined');
    assert.equal(await walletBalance(lipa, token), 5000);
    assert.equal((await ledger(lipa, 'merchant', s.merchant.merchantId)) - merchantBefore, 20000);
    await assertLedgerBalances(lipa);
  });
});

describe('wallet: accept racing expiry (PAYMENT_TTL_SECONDS=1)', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let s: Shop;

  before(async () => {
    // No expiry sweep of its own: the tests sweep when they mean to, so "before a sweeper has
    // run" is so, not most likely so.
    lipa = await startLipa({ PAYMENT_TTL_SECONDS: '1', ...NO_LIMITS }, { expirySweep: false });
    receiver = await startReceiver();
    s = await shop(lipa, receiver);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('accepts fired around the expiry time while sweepers run: paid (once) or expired, never both, one event', async () => {
    const payer = await createPayer(lipa, { balance: 10000 });
    const token = await payerToken(lipa, payer);
    const merchantBefore = await ledger(lipa, 'merchant', s.merchant.merchantId);
    const payments: Payment[] = [];
    for (let i = 0; i < 8; i++) payments.push(await pay(s, receiver, payer.phone, 10));

    const sweeps: Promise<number>[] = [];
    const answeredAt = new Map<Reply, number>();
    const answers = await Promise.all(
      payments.map(async (payment, i) => {
        // Each payment gets its burst at a different offset around its expiry time.
        await sleep(Date.parse(payment.expiresAt) - 250 + i * 60 - Date.now());
        return Promise.all(
          Array.from({ length: 5 }, async (_, k) => {
            await sleep(k * 15);
            if (k === 2) sweeps.push(expireDuePayments(lipa.ctx));
            const reply = await accept(lipa, token, payment.paymentIdentifier, payer.pin);
            // The service and the test share a clock: an answer received by then was decided by then.
            answeredAt.set(reply, Date.now());
            return reply;
          }),
        );
      }),
    );
    await Promise.all(sweeps);

    let paidCount = 0;
    for (const [i, payment] of payments.entries()) {
      const replies = answers[i] ?? [];
      const final = await waitForStatus(s, payment.paymentIdentifier, ['paid', 'expired', 'declined']);
      assert.ok(['paid', 'expired'].includes(final.status), `payment ${i}: ${final.status}`);
      const ok = replies.filter((r) => r.status === 200);
      for (const r of replies.filter((r) => r.status !== 200)) assertNotPending(r, `payment ${i}`);
      const transactions = await paymentTransactions(lipa, payment.paymentIdentifier);
      if (final.status === 'paid') {
        paidCount++;
        assert.equal(ok.length, 1, `payment ${i}: paid by exactly one accept`);
        assert.deepEqual(ok[0]?.body, { status: 'paid' });
        assert.equal(transactions, 1, `payment ${i}: paid once`);
        assert.ok(Date.parse(final.updatedAt) < Date.parse(final.expiresAt), `payment ${i}: paid before its expiry`);
      } else {
        assert.equal(ok.length, 0, `payment ${i} expired but an accept was told ${JSON.stringify(ok[0]?.body)}`);
        assert.equal(transactions, 0, `payment ${i}: expired, yet money moved`);
        // An accept that came in time wins: one refused before the expiry would be a payer turned away.
        for (const reply of replies) {
          const early = Date.parse(final.expiresAt) - (answeredAt.get(reply) ?? 0);
          assert.ok(early <= 0, `payment ${i}: an accept was refused ${early} ms before its expiry: ${reply.text}`);
        }
      }
      const events = await eventsFor(lipa, payment.paymentIdentifier);
      assert.equal(events.length, 1, `payment ${i}: exactly one event`);
      assert.equal(JSON.parse(events[0]?.payload ?? '{}').payment.status, final.status, `payment ${i}: the event says ${final.status}`);
    }
    assert.equal(await ledger(lipa, 'wallet', payer.payerId), 1000000 - paidCount * 1000);
    assert.equal((await ledger(lipa, 'merchant', s.merchant.merchantId)) - merchantBefore, paidCount * 1000);
    await assertLedgerBalances(lipa);
  });

  test('an accept just after expiresAt loses even before a sweeper has run, and after expiry everything answers 409', async () => {
    const payer = await createPayer(lipa, { balance: 100 });
    const token = await payerToken(lipa, payer);
    const payment = await pay(s, receiver, payer.phone, 10);
    await sleep(Date.parse(payment.expiresAt) + 5 - Date.now());
    assertNotPending(await accept(lipa, token, payment.paymentIdentifier, payer.pin), 'accept right after expiresAt');
    const final = await waitForStatus(s, payment.paymentIdentifier, ['expired'], 3000);
    assert.equal(final.reason, undefined);
    assertNotPending(await accept(lipa, token, payment.paymentIdentifier, payer.pin), 'accept of an expired payment');
    assertNotPending(await decline(lipa, token, payment.paymentIdentifier), 'decline of an expired payment');
    assert.equal(await walletBalance(lipa, token), 10000);
    assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 0);
    assert.equal((await eventsFor(lipa, payment.paymentIdentifier)).length, 1);
    const [callback] = await callbacksFor(receiver, payment.paymentIdentifier, 1);
    assert.equal(callback.payment.status, 'expired');
    const list = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token });
    assert.deepEqual(list.body.data, [], 'an expired payment is no longer listed as pending');
  });
});

// PostgreSQL only: there an accept and an expiry really run at once, in two transactions. A
// lock held by the test on the payment's row queues them in a known order, so each order is
// checked every run (SQLite runs one writer at a time: there is no such overlap to check).
if (ON_POSTGRES) {
  describe('PostgreSQL: an accept and an expiry queued on one payment, in each order', () => {
    let lipa: Lipa;
    let receiver: Receiver;
    let s: Shop;

    before(async () => {
      lipa = await startLipa({ PAYMENT_TTL_SECONDS: '60', ...NO_LIMITS }, { expirySweep: false });
      receiver = await startReceiver();
      s = await shop(lipa, receiver);
    });
    after(async () => {
      await lipa.close();
      await receiver.close();
    });

    /** Resolves once `count` statements of this database wait on a lock. */
    async function waitersOnLock(locker: pg.Client, count: number): Promise<void> {
      // Generous: on a busy machine (other test files run alongside) the accept's PIN check
      // can take seconds before its update reaches the lock.
      for (let tries = 0; tries < 1200; tries++) {
        // Inside the locker's transaction the activity view is a snapshot taken at its first
        // read: a connection the pool opened since would stay unseen. Read it afresh each time.
        await locker.query('select pg_stat_clear_snapshot()');
        const { rows } = await locker.query(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        if (rows[0].n >= count) return;
        await sleep(25);
      }
      throw new Error(`fewer than ${count} statements waiting on the lock`);
    }

    for (const first of ['accept', 'expiry'] as const) {
      test(`${first} first: ${first === 'accept' ? 'paid, and the expiry finds nothing to do' : 'expired, and the accept is told 409'}; one event, money moved only if paid`, async () => {
        const payer = await createPayer(lipa, { balance: 100 });
        const token = await payerToken(lipa, payer);
        const payment = await pay(s, receiver, payer.phone, 10);
        // The sweep runs as if its time had come; the accept is made in time, by the real clock.
        const sweeper = { ...lipa.ctx, now: () => Date.parse(payment.expiresAt) + 1000 };
        const locker = new pg.Client({ connectionString: lipa.databaseUrl });
        await locker.connect();
        let accepted: Promise<Reply> | undefined;
        let swept: Promise<number> | undefined;
        try {
          await locker.query('begin');
          await locker.query('select id from payments where id = $1 for update', [payment.paymentIdentifier]);
          if (first === 'accept') {
            accepted = accept(lipa, token, payment.paymentIdentifier, payer.pin);
            await waitersOnLock(locker, 1);
            swept = expireDuePayments(sweeper);
          } else {
            swept = expireDuePayments(sweeper);
            await waitersOnLock(locker, 1);
            accepted = accept(lipa, token, payment.paymentIdentifier, payer.pin);
          }
          await waitersOnLock(locker, 2);
        } finally {
          await locker.query('commit').catch(() => undefined);
          await locker.end();
        }
        const [reply, expired] = await Promise.all([accepted, swept]);
        const final = await statusOf(s, payment.paymentIdentifier);
        if (first === 'accept') {
          assert.equal(reply?.status, 200, reply?.text);
          assert.deepEqual(reply?.body, { status: 'paid' });
          assert.equal(expired, 0, 'the expiry found the payment paid');
          assert.equal(final.status, 'paid');
          assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 1);
          assert.equal(await walletBalance(lipa, token), 9000);
        } else {
          assertNotPending(reply as Reply, 'accept queued behind the expiry');
          assert.equal(expired, 1);
          assert.equal(final.status, 'expired');
          assert.equal(await paymentTransactions(lipa, payment.paymentIdentifier), 0);
          assert.equal(await walletBalance(lipa, token), 10000);
        }
        const events = await eventsFor(lipa, payment.paymentIdentifier);
        assert.equal(events.length, 1, 'exactly one event');
        assert.equal(JSON.parse(events[0]?.payload ?? '{}').payment.status, final.status);
        await assertLedgerBalances(lipa);
      });
    }
  });
}

describe('wallet: expiry with two instances on one database', () => {
  let first: Lipa;
  let second: Lipa;
  let receiver: Receiver;

  before(async () => {
    first = await startLipa({ PAYMENT_TTL_SECONDS: '1', ...NO_LIMITS });
    second = await startLipa({ DATABASE_URL: first.databaseUrl, PAYMENT_TTL_SECONDS: '1', ...NO_LIMITS });
    receiver = await startReceiver();
  });
  after(async () => {
    // The second instance does not own the database: close it first, then the first drops it.
    await second.close();
    await first.close();
    await receiver.close();
  });

  test('60 payments (30 no_user, 30 pending) all expire exactly once with one callback event each', async () => {
    const s1 = await shop(first, receiver);
    const s2: Shop = {
      merchant: s1.merchant,
      client: clientFor(second.url, s1.merchant),
    };
    const payer = await createPayer(first, { balance: 100 });
    const unregistered = uniquePhone();
    const payments = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 2 === 0
          ? pay(i % 4 === 0 ? s1 : s2, receiver, unregistered, 1, 'no_user')
          : pay(i % 4 === 1 ? s1 : s2, receiver, payer.phone, 1, 'pending'),
      ),
    );
    const latest = Math.max(...payments.map((p) => Date.parse(p.expiresAt)));
    // Make the instances sweep at the same moment too, on top of their own timers.
    await sleep(latest + 20 - Date.now());
    const swept = await Promise.all([expireDuePayments(first.ctx), expireDuePayments(second.ctx), expireDuePayments(first.ctx)]);
    assert.ok(swept.reduce((a, b) => a + b, 0) <= 60, `the sweeps claim to have expired ${swept.join('+')} payments`);
    await sleep(latest + 2000 - Date.now());

    const rows = await first.ctx.store.db
      .selectFrom('payments')
      .select(['id', 'status'])
      .where(
        'id',
        'in',
        payments.map((p) => p.paymentIdentifier),
      )
      .execute();
    assert.equal(rows.length, 60);
    assert.deepEqual(
      rows.filter((r) => r.status !== 'expired'),
      [],
      'every payment expired',
    );
    const events = await first.ctx.store.db
      .selectFrom('callback_events')
      .select(['id', 'payment_id', 'payload'])
      .where(
        'payment_id',
        'in',
        payments.map((p) => p.paymentIdentifier),
      )
      .execute();
    const perPayment = new Map<string, number>();
    for (const e of events) {
      perPayment.set(e.payment_id, (perPayment.get(e.payment_id) ?? 0) + 1);
      assert.equal(JSON.parse(e.payload).payment.status, 'expired');
    }
    const duplicated = [...perPayment].filter(([, n]) => n !== 1);
    assert.deepEqual(duplicated, [], 'payments with more than one event');
    assert.equal(perPayment.size, 60, 'every payment has its event');
    assert.equal(await ledger(first, 'wallet', payer.payerId), 10000, 'no money moved');
  });
});

/** A small seeded PRNG (mulberry32): the same seed replays the same sequence of steps. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ModelPayer {
  fixture: PayerFixture;
  token: string;
  deposited: number;
  paid: number;
  /** Refunds received. */
  refunded: number;
  wrongPins: number;
}

interface ModelPayment {
  id: string;
  shop: number;
  phone: string;
  payer: ModelPayer | null;
  amount: number;
  expiresAt: number;
  /** What the test knows: pending/no_user until answered; expiry is settled at the end. */
  status: 'pending' | 'no_user' | 'paid' | 'declined';
  reason?: 'declined_by_payer' | 'insufficient_funds' | 'cancelled_by_merchant';
  events: number;
  refunded: number;
  refunds: number;
}

describe('wallet: ledger property test', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  const shops: Shop[] = [];

  before(async () => {
    lipa = await startLipa({ PAYMENT_TTL_SECONDS: '1', ...NO_LIMITS });
    receiver = await startReceiver();
    shops.push(await shop(lipa, receiver), await shop(lipa, receiver));
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('a random sequence of payers, deposits, payments, accepts, declines, expiries, cancellations, refunds and settlements keeps the books exact', async (t) => {
    const seed = Number(process.env.LIPA_WALLET_SEED ?? Math.floor(Math.random() * 2 ** 32));
    const random = prng(seed);
    const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
    const pick = <T>(items: T[]): T | undefined => items[Math.floor(random() * items.length)];
    let step = 0;
    const trace: string[] = [];
    const lifecycle: string[] = [];
    const at = (message: string) =>
      `${message} [seed ${seed}, step ${step}; replay with LIPA_WALLET_SEED=${seed}]\n${trace.slice(-8).join('\n')}`;
    t.diagnostic(`seed ${seed}`);

    const payers: ModelPayer[] = [];
    const payments: ModelPayment[] = [];
    const waitingPhones: string[] = [];
    const balance = (p: ModelPayer) => p.deposited - p.paid + p.refunded;
    /** Payments that can be answered now without racing their expiry. */
    const answerable = () => payments.filter((p) => p.status === 'pending' && p.payer && Date.now() < p.expiresAt - 450);
    /** What each shop's account holds: its paid payments, less its refunds and settlements. */
    const settled = shops.map(() => 0);
    const shopBalance = (index: number) =>
      payments.filter((p) => p.shop === index && p.status === 'paid').reduce((total, p) => total + p.amount - p.refunded, 0) -
      (settled[index] ?? 0);

    try {
      for (step = 0; step < 150; step++) {
        const r = random();
        if (payers.length < 2 || r < 0.07) {
          // A new payer, sometimes on a phone that already has no_user payments waiting.
          const phone = random() < 0.5 && waitingPhones.length > 0 ? (waitingPhones.shift() as string) : uniquePhone();
          const opening = random() < 0.25 ? 0 : int(1, 300000);
          const before = Date.now();
          const fixture = await createPayer(lipa, { phone, balance: opening / 100, pin: String(int(1000, 9999)) });
          const registered = Date.now();
          const payer: ModelPayer = { fixture, token: '', deposited: opening, paid: 0, refunded: 0, wrongPins: 0 };
          payers.push(payer);
          trace.push(`${step}: payer ${phone} opens with ${opening}`);
          for (const payment of payments.filter((p) => p.phone === phone && p.status === 'no_user')) {
            // Its events tell whether it became pending (it may have expired again since).
            const events = await eventsFor(lipa, payment.id);
            const claimed = events.some((e) => JSON.parse(e.payload).payment.status === 'pending');
            // Recorded and asserted at the end, so that the ledger is still checked when this fails.
            if (payment.expiresAt > registered + 50 && !claimed)
              lifecycle.push(
                `step ${step}: ${payment.id} waited as no_user for ${phone}, which registered before expiry, but never became pending`,
              );
            if (payment.expiresAt <= before) assert.ok(!claimed, at(`${payment.id} became pending after its expiry`));
            if (claimed) {
              payment.status = 'pending';
              payment.payer = payer;
              payment.events++;
            }
          }
          payer.token = await payerToken(lipa, fixture);
        } else if (r < 0.16) {
          const payer = pick(payers) as ModelPayer;
          const amount = int(1, 200000);
          const reply = await admin(lipa, 'POST', `/api/v1/admin/payers/${payer.fixture.phone}/deposits`, { amount: amount / 100 });
          assert.equal(reply.status, 200, at(reply.text));
          payer.deposited += amount;
          assert.equal(cents(reply.body.balance), balance(payer), at('deposit answer'));
          trace.push(`${step}: deposit ${amount} to ${payer.fixture.phone}`);
        } else if (r < 0.42) {
          const shopIndex = int(0, shops.length - 1);
          const toNobody = random() < 0.12;
          const payer = toNobody ? null : (pick(payers) as ModelPayer);
          const phone = payer
            ? payer.fixture.phone
            : random() < 0.5 && waitingPhones.length > 0
              ? (pick(waitingPhones) as string)
              : uniquePhone();
          if (!payer && !waitingPhones.includes(phone)) waitingPhones.push(phone);
          // Sometimes more than the payer has (and may still have when answering).
          const amount = payer && random() < 0.3 ? balance(payer) + int(1, 50000) : int(1, Math.max(1, payer ? balance(payer) : 100000));
          const created = await pay(
            shops[shopIndex] as Shop,
            receiver,
            phone,
            Math.min(amount, 25_000_000) / 100,
            payer ? 'pending' : 'no_user',
          );
          payments.push({
            id: created.paymentIdentifier,
            shop: shopIndex,
            phone,
            payer,
            amount: cents(created.amount),
            expiresAt: Date.parse(created.expiresAt),
            status: payer ? 'pending' : 'no_user',
            events: 0,
            refunded: 0,
            refunds: 0,
          });
          trace.push(`${step}: payment ${created.paymentIdentifier} of ${cents(created.amount)} to ${phone}`);
        } else if (r < 0.62) {
          const payment = pick(answerable());
          if (!payment?.payer) continue;
          const payer = payment.payer;
          const wrong = payer.wrongPins < 3 && random() < 0.1;
          const pin = wrong ? String((Number(payer.fixture.pin) % 9000) + 1000 + 1) : payer.fixture.pin;
          const reply = await accept(lipa, payer.token, payment.id, pin);
          const answeredAt = Date.now();
          trace.push(
            `${step}: accept ${payment.id} (${payment.amount}, balance ${balance(payer)}${wrong ? ', wrong PIN' : ''}) → ${reply.status} ${reply.text}`,
          );
          if (reply.status === 409 && answeredAt >= payment.expiresAt) continue; // slow machine: it expired on the way
          if (wrong) {
            assert.equal(reply.status, 403, at(reply.text));
            assert.equal(reply.body.error.code, 'invalid_pin', at(reply.text));
            payer.wrongPins++;
            continue;
          }
          payer.wrongPins = 0;
          assert.equal(reply.status, 200, at(reply.text));
          payment.events++;
          if (balance(payer) >= payment.amount) {
            assert.deepEqual(reply.body, { status: 'paid' }, at('enough money'));
            payer.paid += payment.amount;
            payment.status = 'paid';
          } else {
            assert.deepEqual(reply.body, { status: 'declined', reason: 'insufficient_funds' }, at('too little money'));
            payment.status = 'declined';
            payment.reason = 'insufficient_funds';
          }
        } else if (r < 0.7) {
          const payment = pick(answerable());
          if (!payment?.payer) continue;
          const reply = await decline(lipa, payment.payer.token, payment.id);
          trace.push(`${step}: decline ${payment.id} → ${reply.status} ${reply.text}`);
          if (reply.status === 409 && Date.now() >= payment.expiresAt) continue;
          assert.equal(reply.status, 200, at(reply.text));
          assert.equal(reply.body.status, 'declined', at(reply.text));
          payment.status = 'declined';
          payment.reason = 'declined_by_payer';
          payment.events++;
        } else if (r < 0.79) {
          // Answers that must be refused: answered, expired, or someone else's payment.
          // Mostly payments answered moments ago (still before their expiry), so that only the status refuses them.
          const recent = payments.filter((p) => p.payer && p.status !== 'pending' && Date.now() < p.expiresAt - 100);
          const payment = pick(recent.length > 0 && random() < 0.7 ? recent : payments.filter((p) => p.payer));
          if (!payment?.payer) continue;
          const refused = payment.status !== 'pending' || Date.now() > payment.expiresAt + 20;
          const stranger = refused ? payment.payer : pick(payers.filter((p) => p !== payment.payer));
          if (!stranger) continue;
          const accepting = random() < 0.5;
          const reply = accepting
            ? await accept(lipa, stranger.token, payment.id, stranger.fixture.pin)
            : await decline(lipa, stranger.token, payment.id);
          trace.push(`${step}: refused answer to ${payment.id} (${payment.status}) → ${reply.status}`);
          // The owner hears it is no longer pending; a stranger that there is no such payment.
          const what = at(`answer to ${payment.id} (${payment.status}, by ${stranger === payment.payer ? 'owner' : 'stranger'})`);
          if (stranger === payment.payer) assertNotPending(reply, what);
          else assertNotFound(reply, what);
          if (accepting) stranger.wrongPins = 0; // the right PIN was checked: the failure count is reset
        } else if (r < 0.88) {
          // A refund of a paid payment: whole, part, or more than is left; the shop may hold too little.
          const payment = pick(payments.filter((p) => p.status === 'paid'));
          if (!payment?.payer) continue;
          const s = shops[payment.shop] as Shop;
          const left = payment.amount - payment.refunded;
          const choice = random();
          const amount = choice < 0.3 ? undefined : choice < 0.85 ? int(1, Math.max(1, left)) : left + int(1, 1000);
          const reply = await s.client.refund({
            paymentIdentifier: payment.id,
            refundReference: `rf-${seed}-${step}`,
            ...(amount === undefined ? {} : { amount: amount / 100 }),
          });
          const wanted = amount ?? left;
          trace.push(`${step}: refund ${wanted} of ${payment.id} (left ${left}, shop has ${shopBalance(payment.shop)}) → ${reply.status}`);
          const code = (reply.body as { error?: { code: string } }).error?.code;
          if (left === 0 && amount === undefined)
            assert.deepEqual([reply.status, code], [409, 'payment_not_refundable'], at('nothing left'));
          else if (wanted > left) assert.deepEqual([reply.status, code], [422, 'validation_failed'], at('more than is left'));
          else if (wanted > shopBalance(payment.shop))
            assert.deepEqual([reply.status, code], [409, 'insufficient_balance'], at('shop short'));
          else {
            assert.equal(reply.status, 201, at(JSON.stringify(reply.body)));
            payment.refunded += wanted;
            payment.refunds++;
            payment.events++;
            payment.payer.refunded += wanted;
          }
        } else if (r < 0.93) {
          // The merchant calls off a request not yet answered (and not about to expire).
          const payment = pick(
            payments.filter((p) => (p.status === 'pending' || p.status === 'no_user') && Date.now() < p.expiresAt - 450),
          );
          if (!payment) continue;
          const reply = await (shops[payment.shop] as Shop).client.cancelPayment(payment.id);
          trace.push(`${step}: cancel ${payment.id} (${payment.status}) → ${reply.status}`);
          if (reply.status === 409 && Date.now() >= payment.expiresAt) continue;
          assert.equal(reply.status, 200, at(JSON.stringify(reply.body)));
          assert.equal((reply.body as Payment).reason, 'cancelled_by_merchant', at('cancelled'));
          payment.status = 'declined';
          payment.reason = 'cancelled_by_merchant';
          payment.events++;
        } else if (r < 0.97) {
          // The operator settles some of a shop's balance to its bank, sometimes more than it has.
          const index = int(0, shops.length - 1);
          const has = shopBalance(index);
          const amount = random() < 0.2 ? has + int(1, 1000) : int(1, Math.max(1, Math.floor(has / 2)));
          const reply = await admin(lipa, 'POST', `/api/v1/admin/merchants/${(shops[index] as Shop).merchant.merchantId}/settlements`, {
            amount: amount / 100,
            reference: `bank-${seed}-${step}`,
          });
          trace.push(`${step}: settle ${amount} of shop ${index} (has ${has}) → ${reply.status}`);
          if (amount > has) assert.deepEqual([reply.status, reply.body.error?.code], [409, 'insufficient_balance'], at('settle too much'));
          else {
            assert.equal(reply.status, 201, at(reply.text));
            settled[index] = (settled[index] ?? 0) + amount;
          }
        } else {
          trace.push(`${step}: wait for expiries`);
          await sleep(1100);
        }
      }

      // Let everything still open expire, then check every payment and the books.
      await sleep(Math.max(0, ...payments.map((p) => p.expiresAt)) + 100 - Date.now());
      for (const payment of payments) {
        const expected = payment.status === 'pending' || payment.status === 'no_user' ? 'expired' : payment.status;
        const final = await waitForStatus(shops[payment.shop] as Shop, payment.id, [expected], 3000).catch((error: Error) => {
          throw new Error(at(error.message));
        });
        if (expected === 'expired') payment.events++;
        assert.equal(final.reason, payment.reason, at(`${payment.id} reason`));
        assert.equal((await eventsFor(lipa, payment.id)).length, payment.events, at(`${payment.id} callback events`));
        assert.equal(await paymentTransactions(lipa, payment.id), payment.status === 'paid' ? 1 : 0, at(`${payment.id} paid once`));
        assert.equal(cents(final.refundedAmount), payment.refunded, at(`${payment.id} refundedAmount`));
        const refundRows = await lipa.ctx.store.db.selectFrom('refunds').select('amount').where('payment_id', '=', payment.id).execute();
        assert.equal(refundRows.length, payment.refunds, at(`${payment.id} refunds`));
      }

      await assertLedgerBalances(lipa, at('books'));
      const books = await postedBooks(lipa);

      const accounts = await lipa.ctx.store.db.selectFrom('ledger_accounts').select(['kind', 'balance']).execute();
      const sum = (kind: string) => accounts.filter((a) => a.kind === kind).reduce((total, a) => total + Number(a.balance), 0);
      assert.equal(sum('wallet') + sum('merchant') + sum('clearing'), -sum('cash_in'), at('wallets + merchants + settled = -cash-in'));

      for (const payer of payers) {
        assert.equal(await walletBalance(lipa, payer.token), balance(payer), at(`wallet of ${payer.fixture.phone} (API)`));
        assert.equal(await ledger(lipa, 'wallet', payer.fixture.payerId), balance(payer), at(`wallet of ${payer.fixture.phone} (ledger)`));
        assert.equal(
          books.byAccount.get(accountId('wallet', payer.fixture.payerId)) ?? 0,
          balance(payer),
          at(`wallet of ${payer.fixture.phone} (its postings)`),
        );
      }
      for (const [index, s] of shops.entries()) {
        // Its payments, less its refunds and settlements.
        assert.equal(await ledger(lipa, 'merchant', s.merchant.merchantId), shopBalance(index), at(`merchant ${index}`));
      }
      const counts = ['paid', 'declined', 'pending', 'no_user'].map((st) => `${st}=${payments.filter((p) => p.status === st).length}`);
      t.diagnostic(`${payers.length} payers, ${payments.length} payments: ${counts.join(' ')} (open ones expired)`);
      const refunds = payments.reduce((total, p) => total + p.refunds, 0);
      const cancelled = payments.filter((p) => p.reason === 'cancelled_by_merchant').length;
      t.diagnostic(`${refunds} refunds, ${cancelled} cancelled, ${settled.filter((s) => s > 0).length} shops settled`);
      assert.deepEqual(lifecycle, [], at('no_user payments must become pending when their phone registers (CONTRACT §6)'));
    } catch (error) {
      if (error instanceof Error && !error.message.includes(`seed ${seed}`)) error.message = at(error.message);
      throw error;
    }
  });
});

describe('/metrics: the payments and messages this instance moved, and the work still open', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  before(async () => {
    // No sweep: the test expires its payments itself, a clock moved past their time, when it is ready to count them.
    lipa = await startLipa({ PAYMENT_TTL_SECONDS: '30' }, { expirySweep: false });
    receiver = await startReceiver();
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  /** The value of one series (0 while it has none); counters are this process's, so tests compare before and after. */
  const series = async (name: string): Promise<number> => {
    const reply = await call(lipa.url, 'GET', '/metrics');
    assert.equal(reply.status, 200);
    const line = reply.text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? 0 : Number(line.slice(name.length + 1));
  };
  const snapshot = async () => ({
    paid: await series('lipa_payment_status_changes_total{status="paid"}'),
    declined: await series('lipa_payment_status_changes_total{status="declined"}'),
    expired: await series('lipa_payment_status_changes_total{status="expired"}'),
    smsDelivered: await series('lipa_message_status_changes_total{type="sms",status="delivered"}'),
    pending: await series('lipa_payments_open{status="pending"}'),
    noUser: await series('lipa_payments_open{status="no_user"}'),
  });

  test('paid, declined and expired are counted once each; the open payments are those still waiting', async () => {
    const s = await shop(lipa, receiver);
    const payer = await createPayer(lipa, { balance: 10_000 });
    const token = await payerToken(lipa, payer);
    const start = await snapshot();
    assert.deepEqual([start.pending, start.noUser], [0, 0]);
    const [paid, declined, expiring] = [
      await pay(s, receiver, payer.phone, 10),
      await pay(s, receiver, payer.phone, 11),
      await pay(s, receiver, payer.phone, 12),
    ];
    await pay(s, receiver, uniquePhone(), 13, 'no_user');
    const open = await snapshot();
    assert.deepEqual([open.pending, open.noUser], [3, 1]);
    // Each prompt to the registered payer went through the embedded outbox, delivered there.
    assert.equal(open.smsDelivered - start.smsDelivered, 3);

    assert.equal((await accept(lipa, token, paid.paymentIdentifier, payer.pin)).status, 200);
    assert.equal((await decline(lipa, token, declined.paymentIdentifier)).status, 200);
    // Refused moves change nothing and count nothing.
    assert.equal((await accept(lipa, token, paid.paymentIdentifier, payer.pin)).status, 409);
    assert.equal((await decline(lipa, token, paid.paymentIdentifier)).status, 409);
    const later = { ...lipa.ctx, now: () => Date.now() + 31_000 };
    assert.equal(await expireDuePayments(later), 2, 'the one left pending and the one waiting for its payer');
    assert.equal((await statusOf(s, expiring.paymentIdentifier)).status, 'expired');

    const end = await snapshot();
    assert.deepEqual([end.paid - start.paid, end.declined - start.declined, end.expired - start.expired], [1, 1, 2]);
    assert.deepEqual([end.pending, end.noUser], [0, 0]);
  });
});
