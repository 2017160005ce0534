import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import type { SmppTransport } from '../src/messaging/transports/smpp.js';
import { call, createPayer, merchantSession } from './helpers/client.js';
import { freshDatabase, type Lipa, startLipa } from './helpers/harness.js';
import { keysOf, lookup, messageRow, messagingKey, send, sleep, sms, until, waitForStatus } from './helpers/messaging.js';
import { type SmppPeer, startSmppPeer } from './helpers/smpp-peer.js';

/**
 * SMS through the messaging API delivered for real to an SMPP peer started by the test:
 * submit_sm, delivery receipts (also ones that overtake their submission), refusals, and a
 * dropped connection re-established.
 */

/** A delivery receipt (deliver_sm, esm_class 4) from the peer for its message `id`, in the usual text shape. */
const receiptFrom = (peer: SmppPeer, id: string, stat: string) =>
  peer.deliver({ esm_class: 0x04, short_message: `id:${id} sub:001 dlvrd:000 stat:${stat} err:000 text:` });

describe("delivery receipts that overtake the submission, over another instance's bind", () => {
  test('two instances, one SMSC: every receipt sent before its submit_sm_resp, over the other bind, is applied once', async () => {
    // The SMSC answers each submit_sm 400 ms late, and sends its receipt at once over the
    // other instance's bind: the receipt always arrives before the submission is on record.
    const peer = await startSmppPeer({ receipts: true, receiptDelayMs: 0, submitDelayMs: 400, receiptsViaOtherSession: true });
    const first = await startLipa({ SMPP_URL: peer.url });
    const second = await startLipa({ SMPP_URL: peer.url, DATABASE_URL: first.databaseUrl });
    try {
      const session = await merchantSession(first);
      const key = (await messagingKey(first, session.token)).apiKey;
      // Both bound before the first send, so that even its receipt has another bind to come over.
      await Promise.all([first, second].map((lipa) => (lipa.ctx.messenger.transports.sms as SmppTransport).ready()));
      assert.equal(peer.binds, 2);
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const reply = await send(i % 2 ? second : first, key, sms({ content: `Early receipt ${i}` }));
        assert.equal(reply.status, 201, reply.text);
        ids.push(reply.body.data.id);
      }
      for (const id of ids) assert.equal((await waitForStatus(first, key, id, ['delivered', 'failed'], 8_000)).status, 'delivered', id);
      assert.equal(peer.submitted.length, 10, 'each submitted once');
      assert.ok(peer.receiptAnswers.length >= 10 && peer.receiptAnswers.every((status) => status === 0), 'every receipt acknowledged');
      const kept = await first.ctx.store.db.selectFrom('early_receipts').select('provider_id').execute();
      assert.deepEqual(kept, [], 'nothing left waiting');
    } finally {
      await second.close();
      await first.close();
      await peer.close();
    }
  });
});

describe('messaging over SMPP', () => {
  const UNDELIVERABLE = '254733000111';
  const REFUSED = '254733000222';
  let peer: SmppPeer;
  let lipa: Lipa;
  let key: string;
  before(async () => {
    // Receipts come 1.5 s after the submission (a real SMSC's come later still), so that a
    // test sees the message sent before it is delivered.
    peer = await startSmppPeer({ receipts: true, receiptDelayMs: 1_500, undeliverable: [UNDELIVERABLE], rejectDestinations: [REFUSED] });
    // A short code sender, with the TON this SMSC wants for it (0) instead of the one read from it (3).
    lipa = await startLipa({ SMPP_URL: peer.url, SMPP_SOURCE_ADDR: '22555', SMPP_SOURCE_TON: '0' });
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  const submittedFor = async (lipa: Lipa, id: string) => {
    const row = await messageRow(lipa, id);
    return peer.submitted.find((s) => row.provider_id !== null && s.messageId === row.provider_id);
  };

  test('the SMSC receives submit_sm to country code + number with the text; 201; the receipt makes it delivered', async () => {
    const count = peer.submitted.length;
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000333' }, content: 'Order 7 is on its way.' }));
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(keysOf(reply.body), ['data', 'message']);
    assert.deepEqual(keysOf(reply.body.data), ['id', 'status']);
    // The answer carries the first attempt's outcome when it comes within 2 s (else queued).
    assert.ok(['queued', 'sent', 'delivered'].includes(reply.body.data.status), reply.text);
    const id = reply.body.data.id;

    const submitted = (await peer.waitFor(count + 1)).at(-1);
    // Sent once the SMSC took it; delivered only by the receipt that follows.
    assert.equal((await waitForStatus(lipa, key, id, ['sent', 'delivered', 'failed'])).status, 'sent');
    assert.equal(submitted?.destination, '254722000333');
    assert.equal(submitted?.text, 'Order 7 is on its way.');
    assert.equal(submitted?.dataCoding, 0);
    assert.equal(submitted?.registeredDelivery ?? 0, 1);
    assert.deepEqual([submitted?.source, submitted?.sourceTon, submitted?.sourceNpi], ['22555', 0, 0], 'SMPP_SOURCE_ADDR and _TON');

    const data = await waitForStatus(lipa, key, id, ['delivered', 'failed']);
    assert.equal(data.status, 'delivered');
    assert.deepEqual(data.phone, { number: '******333', country_code: '254' });
    assert.equal((await messageRow(lipa, id)).provider_id, submitted?.messageId);
    assert.match((await call(lipa.url, 'GET', '/metrics')).text, /^lipa_smpp_bound\{bind="transceiver"\} 1$/m);
  });

  test('SMPP_SOURCE_TON and SMPP_SOURCE_NPI are whole numbers 0-255, unset by default', () => {
    for (const bad of ['256', '-1', 'x', '1.5']) assert.throws(() => loadConfig({ SMPP_SOURCE_TON: bad }), /SMPP_SOURCE_TON/, bad);
    assert.equal(loadConfig({ SMPP_SOURCE_NPI: '9' }).smppSourceNpi, 9);
    assert.deepEqual([loadConfig({}).smppSourceTon, loadConfig({}).smppSourceNpi], [null, null]);
  });

  test('an SMSC throttling for a while: each message waits for the bind to resume and goes out on its first try', async () => {
    const throttledBefore = peer.throttledAt.length;
    peer.throttling = true;
    let sending: Promise<Awaited<ReturnType<typeof send>>[]>;
    try {
      sending = Promise.all([0, 1].map((i) => send(lipa, key, sms({ content: `Throttled ${i}` }))));
      // Throttled: the bind pauses a second, and the SMSC relents meanwhile.
      await peer.until('each throttled', () => peer.throttledAt.length >= throttledBefore + 2, 10_000);
    } finally {
      peer.throttling = false;
    }
    for (const reply of await sending) {
      assert.equal(reply.status, 201, reply.text);
      assert.equal((await waitForStatus(lipa, key, reply.body.data.id, ['delivered', 'failed'], 10_000)).status, 'delivered');
      const row = await messageRow(lipa, reply.body.data.id);
      // Throttling is no failed try: the message never went back to wait for a retry.
      assert.deepEqual([row.attempts, row.last_error], [1, null]);
    }
  });

  test('SMPP_THROUGHPUT paces submit_sm evenly; SMPP_MSG_ID_TYPE lets decimal receipts meet hex ids', async () => {
    for (const bad of ['0', '-1', 'x', '2.5']) assert.throws(() => loadConfig({ SMPP_THROUGHPUT: bad }), /SMPP_THROUGHPUT/, bad);
    for (const bad of ['4', '-2', 'hex', '0x4']) assert.throws(() => loadConfig({ SMPP_MSG_ID_TYPE: bad }), /SMPP_MSG_ID_TYPE/, bad);
    assert.equal(loadConfig({ SMPP_MSG_ID_TYPE: '-1' }).smppMsgIdType, null, "Kannel's as written");
    assert.equal(loadConfig({ SMPP_MSG_ID_TYPE: '01' }).smppMsgIdType, 1);
    assert.deepEqual([loadConfig({}).smppThroughput, loadConfig({}).smppMsgIdType], [null, null]);
    assert.equal(loadConfig({ SMPP_MSG_ID_TYPE: '3' }).smppMsgIdType, 3);
    assert.equal(loadConfig({ SMPP_MSG_ID_TYPE: '0x01' }).smppMsgIdType, 1, 'as Kannel configurations write it');
    // This SMSC answers submits with hex ids and writes its receipts' ids in decimal.
    const other = await startSmppPeer({ receipts: true, receiptDelayMs: 0, receiptIdsDecimal: true });
    const paced = await startLipa({ SMPP_URL: other.url, SMPP_THROUGHPUT: '4', SMPP_MSG_ID_TYPE: '1' });
    try {
      const session = await merchantSession(paced);
      const pacedKey = (await messagingKey(paced, session.token)).apiKey;
      const replies = await Promise.all([0, 1, 2, 3, 4].map((i) => send(paced, pacedKey, sms({ content: `Paced ${i}` }))));
      for (const reply of replies) {
        assert.equal(reply.status, 201, reply.text);
        assert.equal((await waitForStatus(paced, pacedKey, reply.body.data.id, ['delivered', 'failed'], 10_000)).status, 'delivered');
      }
      const at = other.submitted.map((m) => m.at);
      assert.equal(at.length, 5);
      // A quarter second apart (unpaced, they would all come within milliseconds), with some
      // slack for delays between the transport's clock and the peer's reading.
      assert.ok((at[4] ?? 0) - (at[0] ?? 0) >= 800, `a quarter second between submits (${at.map((t) => t - (at[0] ?? 0)).join(', ')} ms)`);
    } finally {
      await paced.close();
      await other.close();
    }
  });

  test('SMPP_BIND=pair: submit_sm on a transmitter bind, the receipt on a receiver bind makes the message delivered', async () => {
    for (const bad of ['both', 'TRANSCEIVER', 'receiver']) assert.throws(() => loadConfig({ SMPP_BIND: bad }), /SMPP_BIND/, bad);
    assert.equal(loadConfig({}).smppBind, 'transceiver');
    // This peer sends receipts only on a session bound to receive them.
    const other = await startSmppPeer({ receipts: true, receiptDelayMs: 0 });
    const paired = await startLipa({ SMPP_URL: other.url, SMPP_BIND: 'pair' });
    try {
      // Bound from the start, before any message.
      await other.until('both binds at start', () => other.bindCommands.length === 2);
      const session = await merchantSession(paired);
      const pairedKey = (await messagingKey(paired, session.token)).apiKey;
      const reply = await send(paired, pairedKey, sms({ content: 'Two binds' }));
      assert.equal(reply.status, 201, reply.text);
      assert.equal((await waitForStatus(paired, pairedKey, reply.body.data.id, ['delivered', 'failed'], 10_000)).status, 'delivered');
      assert.deepEqual([...other.bindCommands].sort(), ['bind_receiver', 'bind_transmitter']);
      assert.equal(other.submitted.at(-1)?.text, 'Two binds');
      // /metrics says whether each bind is up.
      const binds = async () => (await call(paired.url, 'GET', '/metrics')).text.match(/^lipa_smpp_bound\{.*$/gm)?.sort();
      assert.deepEqual(await binds(), ['lipa_smpp_bound{bind="receiver"} 1', 'lipa_smpp_bound{bind="transmitter"} 1']);
      await other.stop();
      await until(
        'both binds down',
        async () => (await binds())?.join() === 'lipa_smpp_bound{bind="receiver"} 0,lipa_smpp_bound{bind="transmitter"} 0',
      );
      await other.start();
      await until(
        'both binds up again',
        async () => (await binds())?.join() === 'lipa_smpp_bound{bind="receiver"} 1,lipa_smpp_bound{bind="transmitter"} 1',
        10_000,
      );
    } finally {
      await paired.close();
      await other.close();
    }
  });

  test('SMPP_SOURCE_ADDR is checked at start, with or without SMPP_URL, and the refusal names it', () => {
    for (const bad of ['TOOLONGSENDERID', 'é', 'Duka\tBora']) {
      assert.throws(() => loadConfig({ SMPP_SOURCE_ADDR: bad }), /^Error: SMPP_SOURCE_ADDR must be a number .* \(got ".*"\)$/, bad);
    }
    for (const good of ['LIPA', 'Duka Bora', '22555', '+254700000000'])
      assert.equal(loadConfig({ SMPP_SOURCE_ADDR: good }).smppSourceAddr, good);
  });

  test('a number written with its trunk prefix goes out in international form', async () => {
    // 0722000555 is how Kenyans write +254 722000555; sent as 2540722000555 it would reach nobody.
    for (const [countryCode, number, destination] of [
      ['254', '0722000555', '254722000555'],
      ['44', '07400123456', '447400123456'],
    ]) {
      const reply = await send(lipa, key, sms({ phone: { country_code: countryCode, number }, content: 'Trunk prefix' }));
      assert.equal(reply.status, 201, reply.text);
      await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
      assert.equal((await submittedFor(lipa, reply.body.data.id))?.destination, destination);
    }
  });

  test('a UCS-2 text goes out with data_coding 8', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000444' }, content: 'Asante 😀' }));
    assert.equal(reply.status, 201, reply.text);
    await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
    const submitted = await submittedFor(lipa, reply.body.data.id);
    assert.equal(submitted?.destination, '254722000444');
    assert.equal(submitted?.dataCoding, 8);
  });

  test('a number the SMSC reports UNDELIV ends failed', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: UNDELIVERABLE.slice(3) } }));
    assert.equal(reply.status, 201, reply.text);
    const id = reply.body.data.id;
    const data = await waitForStatus(lipa, key, id, ['delivered', 'failed']);
    assert.equal(data.status, 'failed');
    assert.match(data.error ?? '', /^The SMS centre reported it not delivered: UNDELIV\b/);
    assert.match((await messageRow(lipa, id)).last_error ?? '', /UNDELIV/);
    assert.equal((await submittedFor(lipa, id))?.destination, UNDELIVERABLE);
  });

  test('a number the SMSC refuses ends failed at once, and the lookup says which status it gave', async () => {
    const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: REFUSED.slice(3) } }));
    assert.equal(reply.status, 201, reply.text);
    const data = await waitForStatus(lipa, key, reply.body.data.id, ['failed']);
    assert.equal(data.error, 'Refused by the SMS centre: ESME_RINVDSTADR (0x0B, invalid destination address).');
    const row = await messageRow(lipa, reply.body.data.id);
    assert.equal(row.attempts, 1, 'a permanent refusal is not retried');
    assert.match(row.last_error ?? '', /^SMSC rejected submit_sm: ESME_RINVDSTADR/);
  });

  test('a dropped connection is bound again and later messages go out', async () => {
    const binds = peer.binds;
    peer.dropConnections();
    await until('a new bind', () => peer.binds > binds);
    const reply = await send(lipa, key, sms({ content: 'After the drop' }));
    assert.equal(reply.status, 201, reply.text);
    const data = await waitForStatus(lipa, key, reply.body.data.id, ['delivered']);
    assert.equal(data.status, 'delivered');
    assert.equal((await submittedFor(lipa, reply.body.data.id))?.text, 'After the drop');
  });

  test('messages sent while the SMSC is down are queued, then go out once it is back', async () => {
    await peer.stop();
    try {
      const reply = await send(lipa, key, sms({ phone: { country_code: '254', number: '722000555' }, content: 'During the outage' }));
      assert.equal(reply.status, 201, reply.text);
      assert.equal(reply.body.data.status, 'queued');
      const id = reply.body.data.id;
      assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
      // Stay down past the transport's first reconnect attempt.
      await sleep(700);
      assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
      await peer.start();
      const data = await waitForStatus(lipa, key, id, ['delivered', 'failed'], 12_000);
      assert.equal(data.status, 'delivered');
      const submitted = await submittedFor(lipa, id);
      assert.equal(submitted?.destination, '254722000555');
      assert.equal(submitted?.text, 'During the outage');
    } finally {
      await peer.start();
    }
  });

  test("a payer's login OTP SMS goes out over SMPP and works at confirm; the stored copy hides the digits", async () => {
    const payer = await createPayer(lipa);
    const count = peer.submitted.length;
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
    assert.equal(started.status, 200, started.text);
    await until('the OTP SMS', () => peer.submitted.slice(count).some((s) => s.destination === payer.phone));
    const submitted = peer.submitted.slice(count).find((s) => s.destination === payer.phone);
    const code = submitted?.text.match(/\b([0-9]{6})\b/)?.[1];
    assert.ok(code, `a 6-digit code in ${submitted?.text}`);

    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: payer.phone, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);

    const row = await lipa.ctx.store.db
      .selectFrom('messages')
      .selectAll()
      .where('purpose', '=', 'otp')
      .where('type', '=', 'sms')
      .where('phone_number', '=', payer.phone.slice(3))
      .executeTakeFirstOrThrow();
    await until('the OTP SMS recorded', async () => ['sent', 'delivered'].includes((await messageRow(lipa, row.id)).status));
    const stored = (await messageRow(lipa, row.id)).content;
    assert.ok(!stored.includes(code), stored);
    assert.match(stored, /\*{6}/);
  });
});

/** A fresh SMPP peer, a service bound to it, and a messaging key of a new merchant. */
async function onPeer() {
  const peer = await startSmppPeer();
  const lipa = await startLipa({ SMPP_URL: peer.url });
  const key = (await messagingKey(lipa, (await merchantSession(lipa)).token)).apiKey as string;
  return { peer, lipa, key };
}

describe('an SMSC that reuses message ids, sends duplicate receipts, and passes on texts from phones', () => {
  test('a receipt kept from before a message was sent never settles it; only its own receipt does', async () => {
    const { peer, lipa, key } = await onPeer();
    try {
      const receipt = (id: string, stat: string) => receiptFrom(peer, id, stat);
      peer.fixedMessageId = 'reused-1';
      const first = (await send(lipa, key, sms({ content: 'First of two with one id.' }))).body.data.id as string;
      assert.equal((await waitForStatus(lipa, key, first, ['sent'])).status, 'sent');
      assert.equal(await receipt('reused-1', 'DELIVRD'), 0);
      assert.equal((await waitForStatus(lipa, key, first, ['delivered'])).status, 'delivered');
      // A duplicate receipt for the delivered message, and one for an id nobody has yet: kept.
      assert.equal(await receipt('reused-1', 'UNDELIV'), 0);
      assert.equal(await receipt('not-yet-1', 'UNDELIV'), 0);
      const kept = await lipa.ctx.store.db
        .selectFrom('early_receipts')
        .select('provider_id')
        .where('provider_id', '=', 'not-yet-1')
        .execute();
      assert.equal(kept.length, 1, 'the receipt for an id nobody has yet is kept (what the third message must not take)');
      // A phone's text to the sender id that reads like a receipt (esm_class 0): no receipt.
      assert.equal(await peer.deliver({ esm_class: 0, short_message: 'id:reused-1 stat:UNDELIV' }), 0);

      const second = await send(lipa, key, sms({ content: 'Second of two with one id.' }));
      assert.equal(second.status, 201, second.text);
      assert.equal(second.body.data.status, 'sent', "not failed by the first message's duplicate receipt");
      peer.fixedMessageId = 'not-yet-1';
      const third = await send(lipa, key, sms({ content: 'Given an id a receipt came for before it.' }));
      assert.equal(third.body.data.status, 'sent', 'not failed by a receipt from before it was sent');
      // The kept receipts are matched every second: still not theirs.
      await sleep(2_500);
      assert.equal((await lookup(lipa, key, second.body.data.id)).body.data.status, 'sent');
      assert.equal((await lookup(lipa, key, third.body.data.id)).body.data.status, 'sent');
      assert.equal(await receipt('reused-1', 'DELIVRD'), 0);
      assert.equal((await waitForStatus(lipa, key, second.body.data.id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal((await lookup(lipa, key, first)).body.data.status, 'delivered');

      // A receipt that comes while a message waits out a throttle came before its submit_sm:
      // not its own, though its attempt had begun.
      peer.fixedMessageId = 'during-pause-1';
      peer.throttleNext = 1;
      const throttledBefore = peer.throttledAt.length;
      const fourth = send(lipa, key, sms({ content: 'Throttled first, then given an id a receipt came for.' }));
      await peer.until('the throttle', () => peer.throttledAt.length > throttledBefore);
      assert.equal(await receipt('during-pause-1', 'UNDELIV'), 0);
      const fourthId = (await fourth).body.data.id as string;
      assert.equal((await waitForStatus(lipa, key, fourthId, ['sent', 'delivered', 'failed'])).status, 'sent');
      await sleep(1_500);
      assert.equal((await lookup(lipa, key, fourthId)).body.data.status, 'sent');
    } finally {
      await lipa.close();
      await peer.close();
    }
  });
});

describe('an SMSC that gives an id again (its counter restarted) while an older message with it waits for its receipt', () => {
  test('the receipt settles the message last given the id; the older one, and a duplicate receipt, leave each other alone', async () => {
    const { peer, lipa, key } = await onPeer();
    try {
      const receipt = (stat: string) => receiptFrom(peer, 'again-1', stat);
      peer.fixedMessageId = 'again-1';
      const older = (await send(lipa, key, sms({ content: 'Older: its receipt never comes.' }))).body.data.id as string;
      assert.equal((await waitForStatus(lipa, key, older, ['sent'])).status, 'sent');
      const newer = (await send(lipa, key, sms({ content: 'Newer: given the same id.' }))).body.data.id as string;
      assert.equal((await waitForStatus(lipa, key, newer, ['sent'])).status, 'sent');
      assert.equal(await receipt('DELIVRD'), 0);
      assert.equal((await waitForStatus(lipa, key, newer, ['delivered', 'failed'])).status, 'delivered');
      // The newer one's duplicate receipt is kept, and matched every second: never the older one's.
      assert.equal(await receipt('UNDELIV'), 0);
      await sleep(2_500);
      assert.equal((await lookup(lipa, key, older)).body.data.status, 'sent');
      assert.equal((await lookup(lipa, key, newer)).body.data.status, 'delivered');
    } finally {
      await lipa.close();
      await peer.close();
    }
  });
});

describe("a merchant's backlog larger than the worker holds at once", () => {
  test('512 merchant messages on the wire to a slow SMSC, 188 more queued: a login code still goes out at once', async () => {
    // Each submit_sm is answered 5 s late, so nothing of the backlog moves during the test.
    const peer = await startSmppPeer({ submitDelayMs: 5_000 });
    const lipa = await startLipa({ SMPP_URL: peer.url });
    try {
      const session = await merchantSession(lipa);
      const key = await messagingKey(lipa, session.token);
      const { merchant_id } = await lipa.ctx.store.db
        .selectFrom('messaging_keys')
        .select('merchant_id')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      // The backlog is stored as the API stores it (700 POSTs would each wait 2 s for the slow SMSC).
      const now = Date.now();
      await lipa.ctx.store.write(async (tx) => {
        for (let i = 0; i < 700; i++) {
          await lipa.ctx.messenger.enqueue(
            tx,
            {
              merchant_id,
              messaging_key_id: key.id,
              purpose: 'api',
              type: 'sms',
              email: null,
              subject: null,
              content_type: null,
              phone_country_code: '254',
              phone_number: `7220${String(i).padStart(5, '0')}`,
              content: `Backlog ${i}`,
              segments: 1,
            },
            now,
            false,
          );
        }
      });
      await peer.waitFor(512, 10_000);
      await sleep(500);
      assert.equal(peer.submitted.length, 512, 'the worker holds 512 merchant messages under way, no more');

      const payer = await createPayer(lipa);
      const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
      assert.equal(started.status, 200, started.text);
      await until('the login code at the SMSC', () => peer.submitted.some((s) => s.destination === payer.phone), 3_000);
      assert.equal(peer.submitted.length, 513, 'the login code went out while the backlog still waited');
    } finally {
      await lipa.close();
      await peer.close();
    }
  });
});

describe('a flood of payment prompts to a paced SMSC', () => {
  test('a login code overtakes the prompts already waiting: claimed first, and first in line for the bind', async () => {
    const peer = await startSmppPeer();
    // Five submit_sm a second: 40 prompts take 8 s to go out.
    const lipa = await startLipa({ SMPP_URL: peer.url, SMPP_THROUGHPUT: '5' });
    try {
      const now = Date.now();
      await lipa.ctx.store.write(async (tx) => {
        for (let i = 0; i < 40; i++) {
          await lipa.ctx.messenger.enqueue(
            tx,
            {
              merchant_id: null,
              messaging_key_id: null,
              purpose: 'payment_prompt',
              type: 'sms',
              email: null,
              subject: null,
              content_type: null,
              phone_country_code: '254',
              phone_number: `7330${String(i).padStart(5, '0')}`,
              content: `Lipa: prompt ${i}`,
              segments: 1,
            },
            now,
            false,
          );
        }
      });
      await peer.waitFor(2, 5_000);
      const payer = await createPayer(lipa);
      const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
      // The prompts gone out by the time the login is answered are not the code's to overtake:
      // at 5 a second, they are as many as this test's setup took (more on a loaded machine).
      const goneBefore = peer.submitted.length;
      assert.equal(started.status, 200, started.text);
      await until('the login code at the SMSC', () => peer.submitted.some((s) => s.destination === payer.phone), 5_000);
      const at = peer.submitted.findIndex((s) => s.destination === payer.phone);
      // Behind at most the prompts already on the wire or through the gate when it came, never behind the 40.
      assert.ok(at - goneBefore <= 6, `the login code went out as submit ${at + 1}, after ${at - goneBefore} prompts sent since the login`);
      assert.ok(peer.submitted.length < 40, 'prompts were still waiting');
    } finally {
      await lipa.close();
      await peer.close();
    }
  });
});

describe('stopping while submits are on the wire', () => {
  test('the stop waits for the SMSC to answer each submit_sm: each is recorded sent, none left to be sent again', async () => {
    const database = await freshDatabase();
    // Each submit_sm answered 3 s late: the API's 2 s wait answers "queued", and the stop
    // comes while all ten are on the wire.
    const peer = await startSmppPeer({ submitDelayMs: 3_000 });
    const lipa = await startLipa({ DATABASE_URL: database.url, SMPP_URL: peer.url });
    let stopped = false;
    try {
      const session = await merchantSession(lipa);
      const key = (await messagingKey(lipa, session.token)).apiKey;
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          send(lipa, key, sms({ phone: { country_code: '254', number: `72200${String(i).padStart(4, '0')}` } })),
        ),
      );
      for (const reply of replies) assert.equal(reply.status, 201, reply.text);
      assert.deepEqual(new Set(replies.map((r) => r.body.data.status)), new Set(['queued']), 'no answer from the SMSC yet');
      const ids = replies.map((r) => r.body.data.id as string);
      assert.equal(peer.submitted.length, 10, 'all ten on the wire');
      await lipa.close();
      stopped = true;

      const store = await openDatabase(database.url);
      const rows = await store.db.selectFrom('messages').select(['status', 'attempts']).where('id', 'in', ids).execute();
      await store.close();
      assert.deepEqual(new Set(rows.map((m) => `${m.status} ${m.attempts}`)), new Set(['sent 1']), 'each recorded sent after one try');
    } finally {
      if (!stopped) await lipa.close();
      await peer.close();
      await database.drop();
    }
  });
});
