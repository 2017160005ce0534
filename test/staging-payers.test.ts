import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LipaClient, Payment } from '../src/client/index.js';
import { checkLedger } from '../src/ledger/ledger.js';
import { admin, call, clientFor, type MerchantSetup, merchantWithPos, paymentBody } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** Every staging test payer's scenario end to end, callbacks received by a real server. */
describe('staging test payers, end to end', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let merchant: MerchantSetup;
  let client: LipaClient;

  before(async () => {
    lipa = await startLipa({ PAYMENT_TTL_SECONDS: '3' });
    receiver = await startReceiver();
    merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
    client = clientFor(lipa.url, merchant);
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  async function payAndWait(phone: string, expected: Payment['status']) {
    const orderId = `order-${phone}-${Date.now()}`;
    const created = await client.createPayment(
      paymentBody(merchant, {
        orderId,
        payer: { method: 'phone', value: phone },
        urls: { callbackUrl: `${receiver.url}/cb/${orderId}` },
      }) as never,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const payment = created.body as Payment;
    const deadline = Date.now() + 8000;
    for (;;) {
      const status = await client.paymentStatus(payment.paymentIdentifier);
      assert.equal(status.status, 200);
      if ((status.body as Payment).status === expected) return { created: payment, final: status.body as Payment, orderId };
      assert.ok(Date.now() < deadline, `payment to ${phone} never became ${expected}: ${JSON.stringify(status.body)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function callbacksFor(orderId: string, count: number) {
    const deadline = Date.now() + 8000;
    for (;;) {
      const mine = receiver.received.filter((r) => r.body.includes(`"orderId":"${orderId}"`));
      if (mine.length >= count) return mine;
      assert.ok(Date.now() < deadline, `expected ${count} callbacks for ${orderId}, got ${mine.length}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The one event of this payment's final change, at both URLs: same eventId, signed, saying `status` (and `reason`). */
  async function assertFinalCallbacks(orderId: string, created: Payment, status: Payment['status'], reason?: string) {
    const callbacks = await callbacksFor(orderId, 2);
    assert.deepEqual(callbacks.map((c) => c.path).sort(), [`/cb/${orderId}`, '/result']);
    const [first, second] = callbacks.map((c) => JSON.parse(c.body));
    assert.equal(first.eventId, second.eventId, 'both URLs get the same eventId');
    assert.equal(first.eventType, 'payment.status_changed');
    assert.equal(first.payment.paymentIdentifier, created.paymentIdentifier);
    assert.equal(first.payment.status, status);
    assert.equal(first.payment.reason, reason);
    for (const callback of callbacks) {
      assert.equal(callback.method, 'POST');
      assert.ok(
        client.verifyCallback({ url: `${receiver.url}${callback.path}`, headers: callback.headers, body: callback.body }),
        'the client verifies the signature',
      );
    }
    return { callbacks, event: first };
  }

  /** The merchant's ledger balance, in minor units. */
  async function merchantBalance(): Promise<number> {
    const row = await lipa.ctx.store.db
      .selectFrom('ledger_accounts')
      .select('balance')
      .where('owner_id', '=', merchant.merchantId)
      .executeTakeFirstOrThrow();
    return Number(row.balance);
  }

  /** Ledger transactions recorded for this payment (a paid one has exactly one). */
  async function transactionsOf(payment: Payment): Promise<number> {
    const rows = await lipa.ctx.store.db
      .selectFrom('ledger_transactions')
      .select('id')
      .where('kind', '=', 'payment')
      .where('reference', '=', payment.paymentIdentifier)
      .execute();
    return rows.length;
  }

  /** The staging payers answer "after about 1 s" (CONTRACT §6): not at once. */
  function assertAnsweredAfterASecond(created: Payment, final: Payment) {
    const after = Date.parse(final.updatedAt) - Date.parse(created.createdAt);
    assert.ok(after >= 950 && after < 5_000, `answered ${after} ms after creation`);
  }

  test('254708000001 accepts after about a second: paid, money moved, signed callbacks to both URLs', async () => {
    const before = await merchantBalance();
    const { created, final, orderId } = await payAndWait('254708000001', 'paid');
    assert.equal(created.status, 'pending');
    assert.equal(final.amount, 1500.5);
    assert.equal(final.reason, undefined);
    assertAnsweredAfterASecond(created, final);
    const { callbacks, event } = await assertFinalCallbacks(orderId, created, 'paid');
    assert.equal(event.payment.merchantStika, 'KES_100234');
    for (const callback of callbacks) {
      assert.ok(
        !client.verifyCallback({ url: `${receiver.url}${callback.path}`, headers: callback.headers, body: `${callback.body} ` }),
        'a tampered body fails',
      );
    }
    assert.equal((await merchantBalance()) - before, 150050);
    assert.equal(await transactionsOf(created), 1);
  });

  test('254708000002 declines after about a second: declined_by_payer, no money moves', async () => {
    const before = await merchantBalance();
    const { created, final, orderId } = await payAndWait('254708000002', 'declined');
    assert.equal(final.reason, 'declined_by_payer');
    assertAnsweredAfterASecond(created, final);
    await assertFinalCallbacks(orderId, created, 'declined', 'declined_by_payer');
    assert.equal(await merchantBalance(), before);
    assert.equal(await transactionsOf(created), 0);
  });

  test('254708000004 has no money: declined with insufficient_funds after about a second, no money moves', async () => {
    const before = await merchantBalance();
    const { created, final, orderId } = await payAndWait('254708000004', 'declined');
    assert.equal(final.reason, 'insufficient_funds');
    assertAnsweredAfterASecond(created, final);
    await assertFinalCallbacks(orderId, created, 'declined', 'insufficient_funds');
    assert.equal(await merchantBalance(), before);
    assert.equal(await transactionsOf(created), 0);
  });

  test('254708000004 takes no deposits (409 test_payer_without_money) and its balance stays 0', async () => {
    const refused = await admin(lipa, 'POST', '/api/v1/admin/payers/254708000004/deposits', { amount: 1000 });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.code, 'test_payer_without_money');
    const payers = await admin(lipa, 'GET', '/api/v1/admin/payers?limit=200');
    const penniless = (payers.body.data as Array<{ phone: string; balance: number }>).find((p) => p.phone === '254708000004');
    assert.equal(penniless?.balance, 0);
    // And so it still cannot pay.
    const { final } = await payAndWait('254708000004', 'declined');
    assert.equal(final.reason, 'insufficient_funds');
  });

  test('254708000003 never answers: expired at the TTL', async () => {
    const { created, final, orderId } = await payAndWait('254708000003', 'expired');
    assert.equal(created.status, 'pending');
    assert.ok(Date.parse(final.updatedAt) >= Date.parse(created.expiresAt));
    await assertFinalCallbacks(orderId, created, 'expired');
    assert.equal(await transactionsOf(created), 0);
  });

  test('an unregistered number gets no_user, then expires, with its callback', async () => {
    const { created, final, orderId } = await payAndWait('254799123456', 'expired');
    assert.equal(created.status, 'no_user');
    assert.ok(Date.parse(final.updatedAt) >= Date.parse(created.expiresAt));
    await assertFinalCallbacks(orderId, created, 'expired');
  });

  test('the ledger balances after all of it', async () => {
    const check = await checkLedger(lipa.ctx.store.db);
    assert.equal(check.total, 0);
    assert.deepEqual([check.mismatched, check.negative, check.unbalanced], [[], [], []]);
  });

  test('the callback log shows every attempt', async () => {
    const payments = await lipa.ctx.store.db.selectFrom('payments').select('id').where('payer_phone', '=', '254708000001').execute();
    const reply = await call(lipa.url, 'GET', `/api/v1/callbacks?paymentIdentifier=${payments[0]?.id}`, { token: merchant.token });
    assert.equal(reply.status, 200);
    assert.equal(reply.body.data.length, 1);
    assert.equal(reply.body.data[0].deliveries.length, 2);
    for (const delivery of reply.body.data[0].deliveries) {
      assert.equal(delivery.status, 'delivered');
      assert.equal(delivery.history.length, 1);
      assert.equal(delivery.history[0].statusCode, 200);
    }
  });
});
