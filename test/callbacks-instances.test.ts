import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_IN_FLIGHT } from '../src/callbacks/worker.js';
import type { Payment, PaymentRequest } from '../src/client/index.js';
import { clientFor, merchantWithPos, paymentBody } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/**
 * Two instances on one database both run the callback worker. The delivery lease means that
 * in normal operation each event reaches each URL exactly once (delivery is at least once
 * only across crashes), and every attempt is recorded once, while both deliver.
 */
describe('callbacks with two instances on one database', () => {
  let first: Lipa;
  let second: Lipa;
  let receiver: Receiver;

  before(async () => {
    first = await startLipa();
    second = await startLipa({ DATABASE_URL: first.databaseUrl });
    receiver = await startReceiver();
  });
  after(async () => {
    await second.close();
    await first.close();
    await receiver.close();
  });

  test('every event reaches each URL once, and both workers deliver', async () => {
    const merchant = await merchantWithPos(first, { resultUrl: `${receiver.url}/result` });
    const client = clientFor(first.url, merchant);
    // The receiver holds every callback until more are open at once than one worker may have
    // in flight: that many can only come from both workers, each having claimed its share.
    const count = Math.ceil((MAX_IN_FLIGHT + 1) / 2) + 5;
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    receiver.respond = () => ({ status: 200, when: held });
    const payments: Payment[] = [];
    try {
      // All at once, so that the first callbacks are not held long: one held 10 s would time
      // out and be sent again, which is not what this test is about.
      const replies = await Promise.all(
        Array.from({ length: count }, () =>
          // 254708000001 pays by itself after about a second: one status change, one event each.
          client.createPayment(
            paymentBody(merchant, {
              payer: { method: 'phone', value: '254708000001' },
              urls: { callbackUrl: `${receiver.url}/cb` },
            }) as PaymentRequest,
          ),
        ),
      );
      for (const reply of replies) {
        assert.equal(reply.status, 201, JSON.stringify(reply.body));
        payments.push(reply.body as Payment);
      }
      await receiver.waitFor(MAX_IN_FLIGHT + 1, 7_000);
    } finally {
      letGo();
    }
    await receiver.waitFor(2 * count, 15_000);
    await new Promise((r) => setTimeout(r, 1500)); // room for a duplicate to show up, if any
    const bodies = receiver.received.map((r) => ({
      path: r.path,
      event: JSON.parse(r.body) as { eventId: string; payment: { paymentIdentifier: string } },
    }));
    assert.equal(bodies.length, 2 * count, 'one callback per payment per URL');
    for (const path of ['/cb', '/result']) {
      const eventIds = bodies.filter((b) => b.path === path).map((b) => b.event.eventId);
      assert.equal(new Set(eventIds).size, count, `${path}: no event twice`);
    }
    const attempts = await first.ctx.store.db
      .selectFrom('callback_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(attempts.n), 2 * count, 'one recorded attempt per delivery');
    const paid = new Set(bodies.map((b) => b.event.payment.paymentIdentifier));
    assert.deepEqual([...paid].sort(), payments.map((p) => p.paymentIdentifier).sort());
  });
});
