import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { type Payment, type PaymentRequest, type Refund, verifyCallback } from '../src/client/index.js';
import { checkLedger } from '../src/ledger/ledger.js';
import { assertError } from './helpers/assertions.js';
import { admin, call, clientFor, merchantWithPos, paymentBody, unique } from './helpers/client.js';
import { freshDatabase, type Lipa, type TestDatabase } from './helpers/harness.js';
import {
  accept,
  callbackBodies,
  cents,
  closeShop,
  ledgerBalance,
  openShop,
  openTill,
  paidPayment,
  refundReference,
  requestPayment,
  type Till,
} from './helpers/money.js';
import { freePort, startLipaProcess } from './helpers/process.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** Refunds and cancellation (CONTRACT §11), over HTTP against the running service. */

async function assertBooks(lipa: Lipa) {
  const check = await checkLedger(lipa.ctx.store.db);
  assert.equal(check.total, 0);
  assert.deepEqual([check.mismatched, check.negative, check.unbalanced, check.statements], [[], [], [], []]);
}

async function refundedAmountOf(till: Till, paymentId: string): Promise<number> {
  const status = await till.client.paymentStatus(paymentId);
  assert.equal(status.status, 200);
  return (status.body as Payment).refundedAmount;
}

describe('refunds (CONTRACT §11)', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let till: Till;

  before(async () => {
    ({ lipa, receiver, till } = await openShop());
  });
  after(() => closeShop({ lipa, receiver }));

  test('a whole refund: 201, the money goes back, the payment stays paid with its refundedAmount', async () => {
    const payment = await paidPayment(lipa, till, receiver, 1500.5);
    const merchantBefore = await ledgerBalance(lipa, 'merchant', till.merchant.merchantId);
    const walletBefore = await ledgerBalance(lipa, 'wallet', till.payer.payerId);
    const reference = refundReference();
    const reply = await till.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: reference });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const refund = reply.body as Refund;
    assert.match(refund.refundIdentifier, /^rfd_/);
    assert.deepEqual(
      { ...refund, refundIdentifier: undefined, createdAt: undefined },
      {
        refundIdentifier: undefined,
        paymentIdentifier: payment.paymentIdentifier,
        refundReference: reference,
        amount: 1500.5,
        currency: 'KES',
        status: 'succeeded',
        reason: null,
        createdAt: undefined,
      },
    );
    assert.equal(await ledgerBalance(lipa, 'merchant', till.merchant.merchantId), merchantBefore - 150050);
    assert.equal(await ledgerBalance(lipa, 'wallet', till.payer.payerId), walletBefore + 150050);
    const status = (await till.client.paymentStatus(payment.paymentIdentifier)).body as Payment;
    assert.equal(status.status, 'paid');
    assert.equal(status.refundedAmount, 1500.5);
    // Nothing is left to refund.
    const again = await till.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference() });
    assert.equal(again.status, 409);
    assert.equal((again.body as { error: { code: string } }).error.code, 'payment_not_refundable');
    await assertBooks(lipa);
  });

  test('partial refunds, several of one payment, up to what was paid; more is a 422 naming amount with what is left', async () => {
    const payment = await paidPayment(lipa, till, receiver, 100);
    const id = payment.paymentIdentifier;
    assert.equal((await till.client.refund({ paymentIdentifier: id, refundReference: refundReference(), amount: 30.25 })).status, 201);
    assert.equal((await till.client.refund({ paymentIdentifier: id, refundReference: refundReference(), amount: 19.75 })).status, 201);
    assert.equal(await refundedAmountOf(till, id), 50);
    const tooMuch = await till.client.refund({ paymentIdentifier: id, refundReference: refundReference(), amount: 50.01 });
    assert.equal(tooMuch.status, 422);
    const details = (tooMuch.body as { error: { details: { field: string; message: string }[] } }).error.details;
    assert.deepEqual(
      details.map((d) => d.field),
      ['amount'],
    );
    assert.match(details[0]?.message ?? '', /50/);
    // Without an amount: all that is left.
    const rest = await till.client.refund({ paymentIdentifier: id, refundReference: refundReference() });
    assert.equal(rest.status, 201);
    assert.equal((rest.body as Refund).amount, 50);
    assert.equal(await refundedAmountOf(till, id), 100);
    await assertBooks(lipa);
  });

  test('the same refundReference and body again is 200 with the same refund; another body is 409 idempotency_conflict', async () => {
    const payment = await paidPayment(lipa, till, receiver, 80);
    const request = { paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference(), amount: 10, reason: 'Damaged' };
    const first = await till.client.refund(request);
    assert.equal(first.status, 201);
    const replay = await till.client.refund(request);
    assert.equal(replay.status, 200);
    assert.deepEqual(replay.body, first.body);
    assert.equal(await refundedAmountOf(till, payment.paymentIdentifier), 10, 'the replay moved no money');
    for (const changed of [{ amount: 11 }, { reason: 'Other' }, { amount: undefined }]) {
      const conflict = await till.client.refund({ ...request, ...changed });
      assert.equal(conflict.status, 409, JSON.stringify(changed));
      assert.equal((conflict.body as { error: { code: string } }).error.code, 'idempotency_conflict');
    }
    // The reference is the merchant's: another payment with it is a conflict too.
    const other = await paidPayment(lipa, till, receiver, 5);
    const elsewhere = await till.client.refund({ ...request, paymentIdentifier: other.paymentIdentifier });
    assert.equal(elsewhere.status, 409);
    assert.equal(await refundedAmountOf(till, other.paymentIdentifier), 0);
  });

  test('only a paid payment of the key merchant is refundable: 404 unknown or another merchant, 409 not paid', async () => {
    const pending = await requestPayment(till, receiver, 10);
    const reply = await till.client.refund({ paymentIdentifier: pending.paymentIdentifier, refundReference: refundReference() });
    assert.equal(reply.status, 409);
    assert.equal((reply.body as { error: { code: string } }).error.code, 'payment_not_refundable');
    const unknown = await till.client.refund({ paymentIdentifier: 'pay_nope', refundReference: refundReference() });
    assert.equal(unknown.status, 404);
    const paid = await paidPayment(lipa, till, receiver, 10);
    const stranger = await merchantWithPos(lipa);
    const theirs = await clientFor(lipa.url, stranger).refund({
      paymentIdentifier: paid.paymentIdentifier,
      refundReference: refundReference(),
    });
    assert.equal(theirs.status, 404);
    assert.equal(await refundedAmountOf(till, paid.paymentIdentifier), 0);
  });

  test('the body rules: reference, amount and reason each named in one 422, and nothing changes', async () => {
    const payment = await paidPayment(lipa, till, receiver, 10);
    const bad = await till.client.refund({
      paymentIdentifier: payment.paymentIdentifier,
      refundReference: 'a\u0007b',
      amount: 1.234,
      reason: 'x\ny',
    });
    assert.equal(bad.status, 422);
    assert.deepEqual((bad.body as { error: { details: { field: string }[] } }).error.details.map((d) => d.field).sort(), [
      'amount',
      'reason',
      'refundReference',
    ]);
    for (const [body, field] of [
      [{ refundReference: '' }, 'refundReference'],
      [{ refundReference: 'x'.repeat(65) }, 'refundReference'],
      [{ refundReference: '   ' }, 'refundReference'],
      [{ amount: 0 }, 'amount'],
      [{ amount: -5 }, 'amount'],
      [{ amount: '5' }, 'amount'],
      [{ reason: 'r'.repeat(201) }, 'reason'],
    ] as const) {
      const reply = await till.client.refund({
        paymentIdentifier: payment.paymentIdentifier,
        refundReference: refundReference(),
        ...body,
      } as never);
      assert.equal(reply.status, 422, JSON.stringify(body));
      assert.ok(
        (reply.body as { error: { details: { field: string }[] } }).error.details.some((d) => d.field === field),
        `${JSON.stringify(body)} names ${field}`,
      );
    }
    assert.equal(await refundedAmountOf(till, payment.paymentIdentifier), 0);
  });

  test('a refund of a payment paid longer ago than REFUND_WINDOW_DAYS is 409 refund_window_closed', async () => {
    const payment = await paidPayment(lipa, till, receiver, 10);
    // Paid 181 days ago, as far as the record says.
    await lipa.ctx.store.db
      .updateTable('payments')
      .set({ updated_at: Date.now() - 181 * 86_400_000 })
      .where('id', '=', payment.paymentIdentifier)
      .execute();
    const reply = await till.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference() });
    assert.equal(reply.status, 409);
    assert.equal((reply.body as { error: { code: string } }).error.code, 'refund_window_closed');
  });

  test('refunds/status: the refund; unknown or another merchant: 404', async () => {
    const payment = await paidPayment(lipa, till, receiver, 10);
    const made = (await till.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference(), amount: 4 }))
      .body as Refund;
    const status = await till.client.refundStatus(made.refundIdentifier);
    assert.equal(status.status, 200);
    assert.deepEqual(status.body, made);
    assert.equal((await till.client.refundStatus('rfd_unknown')).status, 404);
    const stranger = await merchantWithPos(lipa);
    assert.equal((await clientFor(lipa.url, stranger).refundStatus(made.refundIdentifier)).status, 404);
  });

  test('the refund.succeeded callback goes signed to the callbackUrl and the resultUrl, and the payer gets an SMS', async () => {
    const payment = await paidPayment(lipa, till, receiver, 200);
    const made = (
      await till.client.refund({
        paymentIdentifier: payment.paymentIdentifier,
        refundReference: refundReference(),
        amount: 75,
        reason: 'Returned',
      })
    ).body as Refund;
    const deadline = Date.now() + 10_000;
    let mine: ReturnType<typeof callbackBodies> = [];
    while (mine.length < 2 && Date.now() < deadline) {
      mine = [...callbackBodies(receiver, '/cb/'), ...callbackBodies(receiver, '/result')].filter(
        (c) => c.body.eventType === 'refund.succeeded' && c.body.refund.refundIdentifier === made.refundIdentifier,
      );
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(mine.length, 2, 'one to each URL');
    const [one, two] = mine as [(typeof mine)[0], (typeof mine)[0]];
    assert.equal(one.body.eventId, two.body.eventId);
    assert.deepEqual(one.body.refund, made);
    assert.equal(one.body.payment.paymentIdentifier, payment.paymentIdentifier);
    assert.equal(one.body.payment.status, 'paid');
    assert.equal(one.body.payment.refundedAmount, 75);
    for (const { request } of mine) {
      const url = `${receiver.url}${request.path}`;
      assert.ok(verifyCallback({ secret: till.merchant.secret, url, headers: request.headers, body: request.body }), url);
    }
    const outbox = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=50');
    const rows = (Array.isArray(outbox.body) ? outbox.body : outbox.body.data) as { to: string; purpose: string; content: string }[];
    const sms = rows.find((m) => m.purpose === 'refund_notice' && m.to.endsWith(till.payer.phone.slice(-3)) && m.content.includes('75.00'));
    assert.ok(sms, 'the payer is told by SMS');
    assert.match(sms.content, /refunded KES 75\.00/);
  });

  test('20 concurrent partial refunds of one payment whose sum exceeds it: never more than was paid', async () => {
    const payment = await paidPayment(lipa, till, receiver, 100);
    const replies = await Promise.all(
      Array.from({ length: 20 }, () =>
        till.client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference(), amount: 7 }),
      ),
    );
    const made = replies.filter((r) => r.status === 201).length;
    assert.equal(made, 14, 'fourteen of 7 fit in 100');
    for (const r of replies.filter((r) => r.status !== 201)) {
      assert.equal(r.status, 422, JSON.stringify(r.body));
    }
    assert.equal(await refundedAmountOf(till, payment.paymentIdentifier), 98);
    await assertBooks(lipa);
  });

  test('concurrent refunds of several payments against a balance that covers only some: 409 insufficient_balance, never below zero', async () => {
    const shop = await openTill(lipa, receiver);
    const payments = await Promise.all(Array.from({ length: 6 }, () => paidPayment(lipa, shop, receiver, 50)));
    // The operator settles all but 120 of the 300 to the bank.
    const settled = await admin(lipa, 'POST', `/api/v1/admin/merchants/${shop.merchant.merchantId}/settlements`, {
      amount: 180,
      reference: unique('bank-'),
    });
    assert.equal(settled.status, 201, settled.text);
    assert.equal(await ledgerBalance(lipa, 'merchant', shop.merchant.merchantId), 12000);
    const replies = await Promise.all(
      payments.map((p) => shop.client.refund({ paymentIdentifier: p.paymentIdentifier, refundReference: refundReference(), amount: 50 })),
    );
    assert.equal(replies.filter((r) => r.status === 201).length, 2);
    for (const r of replies.filter((r) => r.status !== 201)) {
      assert.equal(r.status, 409);
      assert.equal((r.body as { error: { code: string } }).error.code, 'insufficient_balance');
    }
    assert.equal(await ledgerBalance(lipa, 'merchant', shop.merchant.merchantId), 2000);
    await assertBooks(lipa);
  });
});

describe('refunds and cancellation from the dashboard (merchant bearer)', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let till: Till;

  before(async () => {
    ({ lipa, receiver, till } = await openShop());
  });
  after(() => closeShop({ lipa, receiver }));

  const refund = (paymentId: string, body: object, token = till.merchant.token) =>
    call(lipa.url, 'POST', `/api/v1/payments/${paymentId}/refunds`, { token, body });
  const refundsOf = (paymentId: string, query = '', token = till.merchant.token) =>
    call(lipa.url, 'GET', `/api/v1/payments/${paymentId}/refunds${query}`, { token });

  test('a refund with the session: the same rules and answers as the signed one, and the payment lists it', async () => {
    const payment = await paidPayment(lipa, till, receiver, 30);
    const reference = refundReference();
    const made = await refund(payment.paymentIdentifier, { refundReference: reference, amount: 10, reason: 'Too big' });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.amount, 10);
    const replay = await refund(payment.paymentIdentifier, { refundReference: reference, amount: 10, reason: 'Too big' });
    assert.equal(replay.status, 200);
    assert.deepEqual(replay.body, made.body);
    assert.equal((await refund(payment.paymentIdentifier, { refundReference: reference, amount: 11 })).status, 409);
    const rest = await refund(payment.paymentIdentifier, { refundReference: refundReference() });
    assert.equal(rest.body.amount, 20);
    // Refunded in full: all of it by default is 409, an amount is more than is left (422).
    assertError(await refund(payment.paymentIdentifier, { refundReference: refundReference() }), 409, 'payment_not_refundable');
    assertError(
      await refund(payment.paymentIdentifier, { refundReference: refundReference(), amount: 1 }),
      422,
      'validation_failed',
      'amount',
    );
    // The signed status endpoint finds a refund made from the dashboard.
    assert.equal((await till.client.refundStatus(made.body.refundIdentifier)).status, 200);
    const listed = await refundsOf(payment.paymentIdentifier);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.data.map((r: Refund) => r.amount),
      [20, 10],
    );
    assert.equal(listed.body.nextCursor, null);
    const first = await refundsOf(payment.paymentIdentifier, '?limit=1');
    assert.equal(first.body.data.length, 1);
    const second = await refundsOf(payment.paymentIdentifier, `?limit=1&cursor=${encodeURIComponent(first.body.nextCursor)}`);
    assert.deepEqual([...first.body.data, ...second.body.data], listed.body.data);
    assert.equal(second.body.nextCursor, null);
  });

  test('another merchant, a payer or no token: 404, 403, 401; nothing changes', async () => {
    const payment = await paidPayment(lipa, till, receiver, 30);
    const stranger = await merchantWithPos(lipa);
    assert.equal((await refund(payment.paymentIdentifier, { refundReference: refundReference() }, stranger.token)).status, 404);
    assert.equal((await refundsOf(payment.paymentIdentifier, '', stranger.token)).status, 404);
    assert.equal((await refund(payment.paymentIdentifier, { refundReference: refundReference() }, till.payerToken)).status, 403);
    assert.equal(
      (await call(lipa.url, 'POST', `/api/v1/payments/${payment.paymentIdentifier}/refunds`, { body: { refundReference: 'x' } })).status,
      401,
    );
    const pending = await requestPayment(till, receiver, 5);
    const cancel = (token: string) => call(lipa.url, 'POST', `/api/v1/payments/${pending.paymentIdentifier}/cancel`, { token });
    assert.equal((await cancel(stranger.token)).status, 404);
    assert.equal((await cancel(till.payerToken)).status, 403);
    assert.equal(await refundedAmountOf(till, payment.paymentIdentifier), 0);
    const cancelled = await cancel(till.merchant.token);
    assert.equal(cancelled.status, 200);
    assert.deepEqual([cancelled.body.status, cancelled.body.reason], ['declined', 'cancelled_by_merchant']);
    assert.equal((await cancel(till.merchant.token)).body.error.code, 'payment_not_pending');
  });
});

describe('cancellation (CONTRACT §11)', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let till: Till;

  before(async () => {
    ({ lipa, receiver, till } = await openShop());
  });
  after(() => closeShop({ lipa, receiver }));

  const pendingOf = async () => {
    const reply = await call(lipa.url, 'GET', '/api/v1/wallet/payments?status=pending', { token: till.payerToken });
    const rows = (Array.isArray(reply.body) ? reply.body : reply.body.data) as { paymentIdentifier: string }[];
    return rows.map((p) => p.paymentIdentifier);
  };

  test('a pending payment: declined with cancelled_by_merchant, gone from the payer, its callback sent', async () => {
    const payment = await requestPayment(till, receiver, 10);
    assert.ok((await pendingOf()).includes(payment.paymentIdentifier));
    const reply = await till.client.cancelPayment(payment.paymentIdentifier);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const cancelled = reply.body as Payment;
    assert.equal(cancelled.status, 'declined');
    assert.equal(cancelled.reason, 'cancelled_by_merchant');
    assert.equal(cancelled.refundedAmount, 0);
    assert.ok(!(await pendingOf()).includes(payment.paymentIdentifier));
    const status = (await till.client.paymentStatus(payment.paymentIdentifier)).body as Payment;
    assert.equal(status.reason, 'cancelled_by_merchant');
    const deadline = Date.now() + 10_000;
    let callback: { body: { payment: Payment } } | undefined;
    while (!callback && Date.now() < deadline) {
      callback = callbackBodies(receiver, `/cb/${payment.orderId}`).find((c) => c.body.payment.status === 'declined');
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(callback, 'the callback of the change');
    assert.equal(callback.body.payment.reason, 'cancelled_by_merchant');
    // The payer can no longer answer it.
    assert.equal((await accept(lipa, till, payment.paymentIdentifier)).status, 409);
  });

  test('a no_user payment can be cancelled too', async () => {
    const payment = await requestPayment(till, receiver, 10, '254799000123');
    assert.equal(payment.status, 'no_user');
    const reply = await till.client.cancelPayment(payment.paymentIdentifier);
    assert.equal(reply.status, 200);
    assert.equal((reply.body as Payment).status, 'declined');
  });

  test('any other status is 409 payment_not_pending; unknown or another merchant 404', async () => {
    const paid = await paidPayment(lipa, till, receiver, 10);
    const reply = await till.client.cancelPayment(paid.paymentIdentifier);
    assert.equal(reply.status, 409);
    assert.equal((reply.body as { error: { code: string } }).error.code, 'payment_not_pending');
    const again = await requestPayment(till, receiver, 10);
    assert.equal((await till.client.cancelPayment(again.paymentIdentifier)).status, 200);
    assert.equal((await till.client.cancelPayment(again.paymentIdentifier)).status, 409);
    assert.equal((await till.client.cancelPayment('pay_nope')).status, 404);
    const pending = await requestPayment(till, receiver, 10);
    const stranger = await merchantWithPos(lipa);
    assert.equal((await clientFor(lipa.url, stranger).cancelPayment(pending.paymentIdentifier)).status, 404);
    assert.equal(((await till.client.paymentStatus(pending.paymentIdentifier)).body as Payment).status, 'pending');
  });

  test('cancel racing accept: exactly one wins, and money moves only if the accept did', async () => {
    for (let round = 0; round < 8; round++) {
      const payment = await requestPayment(till, receiver, 3);
      const walletBefore = await ledgerBalance(lipa, 'wallet', till.payer.payerId);
      const [cancel, answer] = await Promise.all([
        till.client.cancelPayment(payment.paymentIdentifier),
        accept(lipa, till, payment.paymentIdentifier),
      ]);
      const winners = [cancel.status, answer.status].filter((s) => s === 200).length;
      assert.equal(winners, 1, `round ${round}: cancel ${cancel.status}, accept ${answer.status}`);
      const final = ((await till.client.paymentStatus(payment.paymentIdentifier)).body as Payment).status;
      const moved = walletBefore - (await ledgerBalance(lipa, 'wallet', till.payer.payerId));
      if (answer.status === 200) assert.deepEqual([final, moved], ['paid', cents(3)]);
      else assert.deepEqual([final, moved, cancel.status], ['declined', 0, 200]);
    }
    await assertBooks(lipa);
  });
});

describe('a refund callback survives a crash of the service process', () => {
  let database: TestDatabase;
  let child: ChildProcess | null = null;
  let receiver: Receiver | null = null;

  before(async () => {
    database = await freshDatabase();
  });
  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await database.drop();
  });

  const until = async <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  test('a refund acknowledged while the receiver is down, then SIGKILL: after restart its callback arrives with the original eventId', async () => {
    const receiverPort = await freePort(); // nothing listens there yet: the receiver is down
    const callbackUrl = `http://127.0.0.1:${receiverPort}/cb`;
    const servicePort = await freePort();
    const start = () => startLipaProcess({ DATABASE_URL: database.url, CALLBACK_RETRY_BASE_SECONDS: '1' }, servicePort);
    const first = await start();
    child = first.child;
    const merchant = await merchantWithPos({ url: first.url } as Lipa, { resultUrl: callbackUrl });
    const client = clientFor(first.url, merchant);
    const request = paymentBody(merchant, { amount: 40 }) as unknown as PaymentRequest;
    request.urls = { callbackUrl };
    const payment = (await client.createPayment(request)).body as Payment;
    // Staging test payer 254708000001 accepts after about a second.
    await until('the payment to be paid', async () =>
      ((await client.paymentStatus(payment.paymentIdentifier)).body as Payment).status === 'paid' ? true : undefined,
    );
    const refund = await client.refund({ paymentIdentifier: payment.paymentIdentifier, refundReference: refundReference(), amount: 15 });
    assert.equal(refund.status, 201);
    const eventId = await until('the refund event with a failed attempt', async () => {
      const reply = await call(first.url, 'GET', `/api/v1/callbacks?paymentIdentifier=${payment.paymentIdentifier}`, {
        token: merchant.token,
      });
      const events = (Array.isArray(reply.body) ? reply.body : reply.body.data) as {
        eventId: string;
        eventType: string;
        deliveries: { history: { error: string | null }[] }[];
      }[];
      const event = events.find((e) => e.eventType === 'refund.succeeded');
      return event?.deliveries[0]?.history.some((a) => a.error !== null) ? event.eventId : undefined;
    });

    first.child.kill('SIGKILL');
    await first.exited;
    receiver = await startReceiver({ port: receiverPort });
    const second = await start();
    child = second.child;
    const delivered = await until('the refund callback after the restart', async () =>
      receiver?.received.map((r) => ({ r, body: JSON.parse(r.body) })).find((x) => x.body.eventType === 'refund.succeeded'),
    );
    assert.equal(delivered.body.eventId, eventId, 'the event written before the crash, with its eventId');
    assert.equal(delivered.body.refund.refundIdentifier, (refund.body as Refund).refundIdentifier);
    assert.equal(delivered.body.payment.refundedAmount, 15);
    assert.ok(verifyCallback({ secret: merchant.secret, url: callbackUrl, headers: delivered.r.headers, body: delivered.r.body }));
    second.child.kill('SIGTERM');
    await second.exited;
  });
});
