import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import { describe, type TestContext, test } from 'node:test';
import { inspect } from 'node:util';
import { type SmppLogger, SmppTransport, type SmppTransportOptions } from '../src/messaging/transports/smpp.js';
import { canonicalMessageId, parseDeliveryReceipt } from '../src/messaging/transports/smpp-protocol.js';
import { parseSmppUrl } from '../src/messaging/transports/smpp-url.js';
import { type DeliveryReceipt, type OutboundSms, PermanentSendError, TransientSendError } from '../src/messaging/transports/transport.js';
import { type SmppPeer, type SmppPeerOptions, startSmppPeer } from './helpers/smpp-peer.js';

/** The SMPP 3.4 transport against a real SMPP server (the `smpp` package's) started per test. */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let nextId = 1;
function sms(content: string, number = '708000001', countryCode = '254'): OutboundSms {
  return { id: `msg_${nextId++}`, countryCode, number, content };
}

/** A peer and a transport bound to it, both closed when the test ends. */
async function setup(
  t: TestContext,
  peerOptions: SmppPeerOptions = {},
  transportOptions: Partial<SmppTransportOptions> = {},
): Promise<{ peer: SmppPeer; transport: SmppTransport }> {
  const peer = await startSmppPeer(peerOptions);
  const transport = new SmppTransport({ url: peer.url, reconnectMinMs: 50, reconnectMaxMs: 400, ...transportOptions });
  t.after(async () => {
    await transport.close();
    await peer.close();
  });
  return { peer, transport };
}

/** A logger that keeps each line as "message {fields}". */
function captureLog(): { logged: string[]; logger: SmppLogger } {
  const logged: string[] = [];
  const log = (obj: object, msg: string) => logged.push(`${msg} ${JSON.stringify(obj)}`);
  return { logged, logger: { debug: log, info: log, warn: log, error: log } };
}

function receiptsOf(transport: SmppTransport): DeliveryReceipt[] {
  const receipts: DeliveryReceipt[] = [];
  transport.onReceipt((receipt) => receipts.push(receipt));
  return receipts;
}

async function until(what: string, probe: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('parseSmppUrl', () => {
  test('reads system_id, password, host and port; smpps is TLS', () => {
    assert.deepEqual(parseSmppUrl('smpp://lipa:s3cret@smsc.example.com:2776'), {
      tls: false,
      host: 'smsc.example.com',
      port: 2776,
      systemId: 'lipa',
      password: 's3cret',
    });
    assert.deepEqual(parseSmppUrl('smpp://lipa:pw@10.0.0.5'), {
      tls: false,
      host: '10.0.0.5',
      port: 2775,
      systemId: 'lipa',
      password: 'pw',
    });
    assert.equal(parseSmppUrl('smpps://lipa:pw@smsc.example.com').tls, true);
    assert.equal(parseSmppUrl('smpps://lipa:pw@smsc.example.com').port, 3550);
    assert.equal(parseSmppUrl('ssmpp://lipa:pw@smsc.example.com:4000').tls, true);
    assert.equal(parseSmppUrl('smpp://lipa:p%40ss%3Aw@[::1]:2775').password, 'p@ss:w');
    assert.equal(parseSmppUrl('smpp://lipa:p%40ss%3Aw@[::1]:2775').host, '::1');
    assert.equal(parseSmppUrl('smpp://lipa@smsc:2775').password, '');
  });

  test('a bad URL is a clear error that never shows the password', () => {
    const cases: Array<[string, RegExp]> = [
      ['not a url hunter2', /is not a URL/],
      ['http://lipa:hunter2@smsc:2775', /scheme "http:"/],
      ['smpp://smsc:2775', /no system_id/],
      ['smpp://lipa:hunter2@smsc:99999', /./],
      ['smpp://lipa:hunter2@smsc:2775/x?window=5', /path, query or fragment/],
    ];
    for (const [url, message] of cases) {
      assert.throws(
        () => parseSmppUrl(url),
        (error: Error) => {
          assert.match(error.message, message);
          assert.match(error.message, /smpp:\/\/system_id:password@host:2775/);
          assert.doesNotMatch(error.message, /hunter2/);
          return true;
        },
        url,
      );
    }
  });

  test('the constructor rejects a bad URL or sender before connecting', () => {
    assert.throws(() => new SmppTransport({ url: 'smtp://x@y' }), /SMPP_URL/);
    assert.throws(() => new SmppTransport({ url: 'smpp://x:y@127.0.0.1:1', sourceAddr: 'TwelveChars!' }), /source address/);
  });
});

describe('parseDeliveryReceipt', () => {
  test('reads the receipt text when there are no TLVs', () => {
    const text = 'id:0A1B2C sub:001 dlvrd:001 submit date:2401011200 done date:2401011201 stat:DELIVRD err:000 text:Hello';
    assert.deepEqual(parseDeliveryReceipt({ esm_class: 0x04, short_message: { message: text } }), {
      providerId: '0A1B2C',
      delivered: true,
      detail: 'DELIVRD err:000',
      final: true,
    });
    const failed = parseDeliveryReceipt({
      esm_class: 0x04,
      short_message: { message: 'id:77 sub:001 dlvrd:000 submit date:2401011200 done date:2401011201 stat:EXPIRED err:027 text:' },
    });
    assert.deepEqual(failed, { providerId: '77', delivered: false, detail: 'EXPIRED err:027', final: true });
  });

  test('prefers the receipted_message_id and message_state TLVs', () => {
    const receipt = parseDeliveryReceipt({
      esm_class: 0x04,
      short_message: { message: '' },
      receipted_message_id: 'abc',
      message_state: 5,
    });
    assert.deepEqual(receipt, { providerId: 'abc', delivered: false, detail: 'UNDELIV', final: true });
  });

  test('canonicalMessageId: a number in decimal without leading zeros; a hex id meets its decimal form', () => {
    assert.equal(canonicalMessageId('0001A2B', true), '6699');
    assert.equal(canonicalMessageId('1a2b', true), '6699');
    assert.equal(canonicalMessageId('0x1A2B', true), '6699', "Kannel's hex reading takes a 0x prefix");
    assert.equal(canonicalMessageId('006699', false), '6699');
    assert.equal(canonicalMessageId('1234', true), '4660', 'all digits, but the SMSC writes hex');
    assert.equal(canonicalMessageId('1234', false), '1234');
    assert.equal(canonicalMessageId('00ff', false), '255', 'not all digits: hex, as Kannel reads it');
    assert.equal(canonicalMessageId('ab-12', false), 'ab-12', 'no number either way: as written');
    assert.equal(canonicalMessageId('ffffffffffffffffffff', true), '1208925819614629174706175', 'beyond 64 bits, exact');
  });

  test('an intermediate notification is not final; a mobile-originated SMS is no receipt', () => {
    assert.equal(parseDeliveryReceipt({ esm_class: 0x04, receipted_message_id: 'x', message_state: 1 })?.final, false);
    assert.equal(parseDeliveryReceipt({ esm_class: 0x00, short_message: { message: 'hello, I want to pay' } }), null);
    // Whatever its text: a phone's reply to a short code can say anything.
    assert.equal(parseDeliveryReceipt({ esm_class: 0x00, short_message: { message: 'id:1 stat:UNDELIV' } }), null);
  });

  test('one state decides both whether it is final and whether it was delivered: the TLV, else the text', () => {
    const receipt = (message: string, state?: number) =>
      parseDeliveryReceipt({ esm_class: 0x04, short_message: { message }, ...(state === undefined ? {} : { message_state: state }) });
    assert.deepEqual(receipt('id:1 stat:DELIVRD err:000', 5), {
      providerId: '1',
      delivered: false,
      detail: 'UNDELIV err:000',
      final: true,
    });
    assert.deepEqual(receipt('id:1 stat:ACCEPTD err:000', 2), {
      providerId: '1',
      delivered: true,
      detail: 'DELIVRD err:000',
      final: true,
    });
    assert.deepEqual(receipt('id:1 stat:DELIVRD err:000', 6), {
      providerId: '1',
      delivered: false,
      detail: 'ACCEPTD err:000',
      final: false,
    });
    // Some SMSCs write the stat out in full.
    assert.deepEqual(receipt('id:1 stat:DELIVERED err:000'), {
      providerId: '1',
      delivered: true,
      detail: 'DELIVRD err:000',
      final: true,
    });
    assert.deepEqual(receipt('id:1 stat:UNDELIVERABLE'), {
      providerId: '1',
      delivered: false,
      detail: 'UNDELIV',
      final: true,
    });
    // No state at all: nothing is known of the message's fate, so it is not settled by this.
    assert.equal(receipt('id:1 sub:001 dlvrd:001')?.final, false);
  });
});

describe('SmppTransport', () => {
  test('submit_sm reaches the SMSC with the destination, sender and GSM text; the message_id is the providerId', async (t) => {
    const { peer, transport } = await setup(t);
    const result = await transport.send(sms('Lipa: KES 1,000 received from Amina. Ref {A1}, fee €0 ~ ok', '708000001', '254'));
    const [submitted] = await peer.waitFor(1);
    assert.ok(submitted);
    assert.equal(result.status, 'sent');
    assert.equal(result.providerId, submitted.messageId);
    assert.equal(submitted.destination, '254708000001');
    assert.equal(submitted.destTon, 1);
    assert.equal(submitted.destNpi, 1);
    assert.equal(submitted.source, 'LIPA');
    assert.equal(submitted.sourceTon, 5);
    assert.equal(submitted.sourceNpi, 0);
    assert.equal(submitted.registeredDelivery, 1);
    assert.equal(submitted.dataCoding, 0);
    assert.equal(submitted.payload, false);
    assert.equal(submitted.text, 'Lipa: KES 1,000 received from Amina. Ref {A1}, fee €0 ~ ok');
    assert.equal(peer.binds, 1);
  });

  test('a text outside GSM 03.38 goes as UCS-2 (data_coding 8)', async (t) => {
    const { peer, transport } = await setup(t);
    await transport.send(sms('Habari 😀'));
    await transport.send(sms('Ça coûte 5 €'));
    const [emoji, french] = await peer.waitFor(2);
    assert.equal(emoji?.dataCoding, 8);
    assert.equal(emoji?.text, 'Habari 😀');
    assert.equal(french?.dataCoding, 8);
    assert.equal(french?.text, 'Ça coûte 5 €');
  });

  test('a text longer than one SMS goes whole in message_payload', async (t) => {
    const { peer, transport } = await setup(t);
    const longGsm = 'Lipa receipt. '.repeat(30).trim();
    const longUcs2 = 'Asante sana 😀 '.repeat(10).trim();
    await transport.send(sms(longGsm));
    await transport.send(sms(longUcs2));
    const [gsm, ucs2] = await peer.waitFor(2);
    assert.equal(gsm?.payload, true);
    assert.equal(gsm?.dataCoding, 0);
    assert.equal(gsm?.text, longGsm);
    assert.equal(ucs2?.payload, true);
    assert.equal(ucs2?.dataCoding, 8);
    assert.equal(ucs2?.text, longUcs2);
  });

  for (const [sourceAddr, source, ton, npi, kind] of [
    ['+254700000000', '254700000000', 1, 1, 'a number goes as an international number'],
    ['254700000000', '254700000000', 1, 1, 'a number without + goes as an international number too'],
    ['22555', '22555', 3, 0, 'a short code (digits, at most 8, no plus) goes as a network-specific number, not +22555'],
    ['Duka Bora', 'Duka Bora', 5, 0, 'a name goes alphanumeric'],
  ] as const) {
    test(`sender ${sourceAddr}: ${kind}`, async (t) => {
      const { peer, transport } = await setup(t, {}, { sourceAddr });
      await transport.send(sms('hi'));
      const [submitted] = await peer.waitFor(1);
      assert.deepEqual([submitted?.source, submitted?.sourceTon, submitted?.sourceNpi], [source, ton, npi]);
    });
  }

  test('delivery receipts reach onReceipt: DELIVRD is delivered, UNDELIV is not, and each is acknowledged', async (t) => {
    const { peer, transport } = await setup(t, { receipts: true, receiptDelayMs: 20, undeliverable: ['254708000999'] });
    const receipts = receiptsOf(transport);
    const ok = await transport.send(sms('one', '708000001'));
    const bad = await transport.send(sms('two', '708000999'));
    await until('two receipts', () => receipts.length === 2);
    const byId = new Map(receipts.map((r) => [r.providerId, r]));
    assert.equal(byId.get(ok.providerId ?? '')?.delivered, true);
    assert.match(byId.get(ok.providerId ?? '')?.detail ?? '', /^DELIVRD err:000$/);
    assert.equal(byId.get(bad.providerId ?? '')?.delivered, false);
    assert.match(byId.get(bad.providerId ?? '')?.detail ?? '', /^UNDELIV err:001$/);
    await until('deliver_sm_resp', () => peer.receiptAnswers.length === 2);
    assert.deepEqual(peer.receiptAnswers, [0, 0]);
  });

  // As Kannel reads receipts: receipted_message_id first, else the text's id:, in the receipts' form.
  for (const [form, receiptTlvs, receiptIdsDecimal, messageIdType] of [
    ['TLV and text decimal: type 1', true, true, 1],
    ['text only, decimal: type 1', false, true, 1],
    ['TLV repeating the hex id, text decimal: type 3', true, 'text', 3],
  ] as const) {
    test(`an SMSC that answers in hex, its receipts ${form} makes them meet`, async (t) => {
      const { peer, transport } = await setup(t, { receipts: true, receiptDelayMs: 0, receiptIdsDecimal, receiptTlvs }, { messageIdType });
      // A hex id of digits only: read as decimal it would be another number (268,435,747 is 0x10000123).
      peer.fixedMessageId = '10000123';
      const receipts = receiptsOf(transport);
      const sent = await transport.send(sms('numbered'));
      const [submitted] = await peer.waitFor(1);
      assert.equal(sent.providerId, BigInt(`0x${submitted?.messageId}`).toString(10));
      await until('the receipt', () => receipts.length === 1);
      assert.equal(receipts[0]?.providerId, sent.providerId);
    });
  }

  test('receipts carrying only the text (no TLVs) are read too', async (t) => {
    const { transport } = await setup(t, { receipts: true, receiptTlvs: false, undeliverable: ['254708000999'] });
    const receipts = receiptsOf(transport);
    const ok = await transport.send(sms('one', '708000001'));
    const bad = await transport.send(sms('two', '708000999'));
    await until('two receipts', () => receipts.length === 2);
    assert.deepEqual(
      receipts.map((r) => [r.providerId, r.delivered]).sort(),
      [
        [ok.providerId, true],
        [bad.providerId, false],
      ].sort(),
    );
  });

  test('the receipt is acknowledged after an async listener; a failing one asks the SMSC to send it again', async (t) => {
    const { peer, transport } = await setup(t, { receipts: true });
    let fail = true;
    transport.onReceipt(async () => {
      await sleep(30);
      if (fail) throw new Error('database unavailable');
    });
    await transport.send(sms('first'));
    await until('first answer', () => peer.receiptAnswers.length === 1);
    assert.equal(peer.receiptAnswers[0], 0x64); // ESME_RX_T_APPN: temporary, resend later
    fail = false;
    await transport.send(sms('second'));
    await until('second answer', () => peer.receiptAnswers.length === 2);
    assert.equal(peer.receiptAnswers[1], 0);
  });

  test('enquire_link keeps the bind alive', async (t) => {
    const { peer, transport } = await setup(t, {}, { enquireLinkMs: 50 });
    await transport.send(sms('hello'));
    await peer.until('3 enquire_link', () => peer.enquireLinks >= 3);
    await transport.send(sms('still there'));
    assert.equal(peer.binds, 1);
    assert.equal(peer.connections(), 1);
    assert.equal(transport.bound, true);
  });

  test('reconnects back off from reconnectMinMs, doubling, to at most reconnectMaxMs', async (t) => {
    // An SMSC that takes each connection and drops it before the bind.
    const at: number[] = [];
    const server = createServer((socket) => {
      at.push(performance.now());
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const transport = new SmppTransport({ url: `smpp://lipa:pw@127.0.0.1:${port}`, reconnectMinMs: 50, reconnectMaxMs: 200 });
    t.after(async () => {
      await transport.close();
      await new Promise((resolve) => server.close(resolve));
    });
    transport.start();
    // Doubling without a cap, the tenth try would come 25 s after the first.
    await until('ten tries', () => at.length >= 10, 8_000);
    const gaps = at.slice(1).map((time, i) => time - (at[i] ?? 0));
    // Each delay is its step's ±20 %: 50, 100, then 200 ms. Timers never fire early; late on a busy machine.
    for (const [i, step] of [50, 100, 200, 200, 200, 200].entries()) {
      assert.ok((gaps[i] ?? 0) >= step * 0.8 - 2, `try ${i + 2} came ${gaps[i]} ms after the one before, under ${step} ms - 20 %`);
    }
    const sorted = gaps.slice(2).sort((a, b) => a - b);
    assert.ok((sorted[Math.floor(sorted.length / 2)] ?? 0) <= 200 * 1.2 + 50, `capped at reconnectMaxMs (${gaps.join(', ')})`);
  });

  test('an unanswered enquire_link (dead link) makes the transport reconnect and bind again', async (t) => {
    const { peer, transport } = await setup(t, {}, { enquireLinkMs: 50, responseTimeoutMs: 200 });
    await transport.ready();
    peer.answerEnquireLink = false;
    await peer.until('a second bind', () => peer.binds >= 2 && transport.bound);
    peer.answerEnquireLink = true;
    const result = await transport.send(sms('after the dead link'));
    assert.ok(result.providerId);
  });

  test('a dropped connection is re-established and sends queued during the outage go out', async (t) => {
    const { peer, transport } = await setup(t, { receipts: true });
    const receipts = receiptsOf(transport);
    await transport.send(sms('before'));
    peer.dropConnections();
    await until('the transport to notice', () => !transport.bound);
    const queued = Promise.all([transport.send(sms('during 1')), transport.send(sms('during 2')), transport.send(sms('during 3'))]);
    const results = await queued;
    assert.equal(results.length, 3);
    assert.equal(peer.binds, 2);
    const texts = (await peer.waitFor(4)).map((s) => s.text);
    assert.deepEqual(texts.slice(1).sort(), ['during 1', 'during 2', 'during 3']);
    // Receipts for messages sent on the new bind arrive on it.
    await until('receipts', () => results.every((r) => receipts.some((x) => x.providerId === r.providerId)));
  });

  test('an unbind from the SMSC is answered and the transport binds again', async (t) => {
    const { logged, logger } = captureLog();
    const { peer, transport } = await setup(t, {}, { logger });
    await transport.send(sms('before'));
    peer.unbindAll();
    await peer.until('a second bind', () => peer.binds === 2 && transport.bound);
    assert.ok((await transport.send(sms('after'))).providerId);
    assert.ok(
      logged.some((line) => line.startsWith('SMPP unbound by the SMSC; binding again')),
      logged.join('\n'),
    );
    assert.ok(!logged.some((line) => line.includes('connection failed')), 'an unbind is no failed connection');
  });

  test('an SMSC that is down for a while: sends wait for it, then go out on the same port', async (t) => {
    const { peer, transport } = await setup(t, {}, { bindWaitMs: 5_000 });
    await transport.send(sms('before'));
    await peer.stop();
    await until('the transport to notice', () => !transport.bound);
    const queued = Promise.all([transport.send(sms('while down 1')), transport.send(sms('while down 2'))]);
    await sleep(600);
    assert.equal(peer.submitted.length, 1);
    await peer.start();
    const results = await queued;
    assert.ok(results.every((r) => r.status === 'sent' && r.providerId));
    assert.deepEqual((await peer.waitFor(3)).map((s) => s.text).sort(), ['before', 'while down 1', 'while down 2']);
  });

  test('no SMSC at all: send gives up after bindWaitMs with a TransientSendError', async (t) => {
    const peer = await startSmppPeer();
    await peer.close(); // nothing listens on this port any more
    const transport = new SmppTransport({ url: peer.url, bindWaitMs: 300, reconnectMinMs: 50 });
    t.after(() => transport.close());
    const started = Date.now();
    await assert.rejects(transport.send(sms('nobody home')), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /not bound to SMSC smpp:\/\/lipa@127\.0\.0\.1:\d+ after 300 ms \(last error: .*ECONNREFUSED/);
      return true;
    });
    assert.ok(Date.now() - started < 2_000);
  });

  test('a rejected destination is a PermanentSendError; throttled with nothing else taken, a TransientSendError after throttleRetryMs', async (t) => {
    const { peer, transport } = await setup(
      t,
      { rejectDestinations: ['254708000666'], throttleDestinations: ['254708000777'] },
      { throttlePauseMs: 50, throttleRetryMs: 300 },
    );
    await assert.rejects(transport.send(sms('x', '708000666')), (error: Error) => {
      assert.ok(error instanceof PermanentSendError);
      assert.match(error.message, /ESME_RINVDSTADR \(0x0B, invalid destination address\)/);
      return true;
    });
    await assert.rejects(transport.send(sms('x', '708000777')), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /ESME_RTHROTTLED \(0x58, throttled\)/);
      return true;
    });
    assert.ok(peer.throttledAt.length >= 2, `submitted again after each pause (${peer.throttledAt.length} tries)`);
    await assert.rejects(transport.send(sms('x', '70800a')), PermanentSendError);
    // The bind is unaffected.
    assert.ok((await transport.send(sms('fine'))).providerId);
  });

  test('a wrong password: the bind is refused and send fails at once with a clear TransientSendError', async (t) => {
    const peer = await startSmppPeer({ password: 'right-pw' });
    const url = peer.url.replace('right-pw', 'wrong-pw');
    const { logged, logger } = captureLog();
    const transport = new SmppTransport({ url, reconnectMinMs: 50, logger });
    t.after(async () => {
      await transport.close();
      await peer.close();
    });
    const started = Date.now();
    await assert.rejects(transport.send(sms('x')), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /refused bind_transceiver for system_id "lipa": ESME_RINVPASWD \(0x0E, invalid password\)/);
      assert.doesNotMatch(error.message, /wrong-pw|right-pw/);
      return true;
    });
    assert.ok(Date.now() - started < 2_000, 'a refused bind does not wait for bindWaitMs');
    await assert.rejects(transport.send(sms('y')), TransientSendError);
    assert.ok(peer.bindFailures >= 1);
    assert.equal(peer.submitted.length, 0);
    // It keeps trying (the password may be fixed at the SMSC's end), and says so once, not each time.
    await until('several refused binds', () => peer.bindFailures >= 4);
    const refusals = logged.filter((line) => line.startsWith('SMSC ') && line.includes('refused bind_transceiver'));
    assert.equal(refusals.length, 1, logged.join('\n'));
    assert.equal(logged.filter((line) => line.startsWith('SMPP connection failed; retrying')).length, 1, logged.join('\n'));
    for (const line of logged) assert.doesNotMatch(line, /wrong-pw/);
    assert.doesNotMatch(inspect(transport, { depth: 6 }), /wrong-pw/);
  });

  test('close() unbinds, stops reconnecting, and later sends fail', async (t) => {
    const { peer, transport } = await setup(t);
    await transport.send(sms('last'));
    await transport.close();
    assert.equal(peer.unbinds, 1);
    await sleep(200);
    assert.equal(peer.binds, 1);
    assert.equal(peer.connections(), 0);
    await assert.rejects(transport.send(sms('too late')), /closed/);
  });

  test('bind pair: submits go on a transmitter bind, receipts come on a receiver bind, and close() unbinds both', async (t) => {
    const { logged, logger } = captureLog();
    const { peer, transport } = await setup(t, { receipts: true, undeliverable: ['254708000999'] }, { bind: 'pair', logger });
    const receipts = receiptsOf(transport);
    const ok = await transport.send(sms('one', '708000001'));
    const bad = await transport.send(sms('two', '708000999'));
    await until('two receipts', () => receipts.length === 2);
    // The peer sends receipts only on a session bound to receive, and refuses submits on a receiver.
    assert.deepEqual([...peer.bindCommands].sort(), ['bind_receiver', 'bind_transmitter']);
    assert.deepEqual(
      receipts.map((r) => [r.providerId, r.delivered]).sort(),
      [
        [ok.providerId, true],
        [bad.providerId, false],
      ].sort(),
    );
    await until('deliver_sm_resp', () => peer.receiptAnswers.length === 2);
    assert.deepEqual(peer.receiptAnswers, [0, 0]);
    assert.equal(peer.connections(), 2);
    assert.ok(transport.bound && transport.receiving);
    assert.ok(logged.some((line) => line.startsWith('SMPP bound as transmitter {"smsc"') && line.includes('"bind":"transmitter"')));
    assert.ok(logged.some((line) => line.startsWith('SMPP bound as receiver {"smsc"') && line.includes('"bind":"receiver"')));
    await transport.close();
    assert.equal(peer.unbinds, 2);
    await sleep(100);
    assert.equal(peer.connections(), 0);
    assert.equal(peer.binds, 2);
  });

  test('bind pair: each bind is kept up on its own; receipts held while the receiver was down arrive when it binds again', async (t) => {
    // Binds again after 0.4-0.6 s: long enough for a submit and its receipt while the receiver is down.
    const { peer, transport } = await setup(
      t,
      { receipts: true, receiptDelayMs: 0 },
      { bind: 'pair', reconnectMinMs: 500, reconnectMaxMs: 500 },
    );
    const receipts = receiptsOf(transport);
    await transport.send(sms('before'));
    await until('the first receipt', () => receipts.length === 1);
    peer.dropConnections('bind_receiver');
    await until('the transport to notice', () => !transport.receiving);
    // The transmitter is untouched: it submits meanwhile, and the SMSC holds the receipt.
    assert.equal(transport.bound, true);
    const during = await transport.send(sms('during'));
    await sleep(20);
    assert.equal(transport.receiving, false, 'the receipt came while the receiver was down');
    assert.ok(!receipts.some((r) => r.providerId === during.providerId));
    await until('the receiver to bind again', () => transport.receiving);
    await until('the held receipt', () => receipts.some((r) => r.providerId === during.providerId));
    assert.equal(peer.bindCommands.filter((c) => c === 'bind_transmitter').length, 1);
    assert.equal(peer.bindCommands.filter((c) => c === 'bind_receiver').length, 2);
    // And a dropped transmitter binds again on its own, the receiver untouched.
    peer.dropConnections('bind_transmitter');
    await until('the transport to notice', () => !transport.bound);
    assert.equal(transport.receiving, true);
    const after = await transport.send(sms('after'));
    await until('its receipt', () => receipts.some((r) => r.providerId === after.providerId));
    assert.equal(peer.bindCommands.filter((c) => c === 'bind_transmitter').length, 2);
    assert.equal(peer.bindCommands.filter((c) => c === 'bind_receiver').length, 2);
  });

  test('submits are pipelined on one bind and the window is respected', async (t) => {
    const { peer, transport } = await setup(t, { submitDelayMs: 100 }, { windowSize: 20 });
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => transport.send(sms(`pipelined ${i}`))));
    assert.equal(new Set(results.map((r) => r.providerId)).size, 60);
    assert.equal(peer.maxOutstanding, 20, 'exactly windowSize submit_sm awaited their answer at once');
    assert.equal(peer.binds, 1);
  });

  test("with the window full, the service's own messages take the next free places, ahead of those waiting", async (t) => {
    const { peer, transport } = await setup(t, { submitDelayMs: 100 }, { windowSize: 2 });
    const merchants = Array.from({ length: 8 }, (_, i) => transport.send(sms(`merchant ${i}`)));
    await peer.waitFor(2);
    const own = [transport.send({ ...sms('login code'), urgent: true }), transport.send({ ...sms('payment prompt'), urgent: true })];
    await Promise.all([...merchants, ...own]);
    assert.deepEqual(
      peer.submitted.map((m) => m.text),
      ['merchant 0', 'merchant 1', 'login code', 'payment prompt', ...Array.from({ length: 6 }, (_, i) => `merchant ${i + 2}`)],
    );
    assert.equal(peer.maxOutstanding, 2);
  });

  test("throttled, the bind pauses, then every send goes again, the service's own first; none fails", async (t) => {
    const { logged, logger } = captureLog();
    const { peer, transport } = await setup(t, {}, { throttlePauseMs: 300, logger });
    await transport.ready();
    peer.throttling = true;
    const merchants = Array.from({ length: 5 }, (_, i) => transport.send(sms(`merchant ${i}`)));
    // Once all five wait out a pause (none on the wire), the SMSC relents and a login code comes.
    await peer.until('five throttled sends waiting', () => peer.throttledAt.length >= 5 && transport.inFlight === 0 && transport.paused);
    peer.throttling = false;
    const own = transport.send({ ...sms('login code'), urgent: true });
    const results = await Promise.all([...merchants, own]);
    assert.equal(new Set(results.map((r) => r.providerId)).size, 6, 'each taken, once');
    assert.equal(peer.submitted[0]?.text, 'login code', 'the login code first, though it came last');
    assert.equal(peer.submitted.length, 6);
    const lastThrottled = Math.max(...peer.throttledAt);
    const firstTaken = peer.submitted[0]?.at ?? 0;
    assert.ok(firstTaken - lastThrottled >= 295, `nothing submitted during the pause (${firstTaken - lastThrottled} ms after it began)`);
    assert.equal(logged.filter((line) => line.includes('is throttling')).length, 1, 'one warning for the lot');
    assert.match(logged.find((line) => line.includes('is throttling')) ?? '', /ESME_RTHROTTLED \(0x58, throttled\); submits pause/);
  });

  test('maxSubmitsPerSecond: no second holds more submits than allowed, and the own messages still go first', async (t) => {
    const { peer, transport } = await setup(t, {}, { maxSubmitsPerSecond: 20 });
    await transport.ready();
    const merchants = Array.from({ length: 40 }, (_, i) => transport.send(sms(`paced ${i}`)));
    await peer.waitFor(10);
    const before = peer.submitted.length;
    const own = transport.send({ ...sms('login code'), urgent: true });
    await Promise.all([...merchants, own]);
    const at = peer.submitted.map((m) => m.at);
    assert.equal(at.length, 41);
    // 20 a second, evenly spaced: any 21 consecutive submits span a second (less some slack
    // for delays between the transport's clock and the peer's reading; unpaced, they span ms).
    for (let i = 0; i + 20 < at.length; i++) assert.ok((at[i + 20] ?? 0) - (at[i] ?? 0) >= 850, `submits ${i}..${i + 20} within a second`);
    const ownAt = peer.submitted.findIndex((m) => m.text === 'login code');
    assert.ok(ownAt >= before && ownAt <= before + 2, `the login code went next, not after the ${40 - before} waiting (${ownAt})`);
  });

  test('a number the SMSC keeps throttling while it takes others goes back to the worker; those behind it go on', async (t) => {
    const { peer, transport } = await setup(
      t,
      { throttleDestinations: ['254700000999'] },
      { maxSubmitsPerSecond: 50, throttlePauseMs: 300 },
    );
    await transport.ready();
    const refused = transport.send(sms('to a refused number', '700000999')).catch((error: unknown) => error);
    const others = Array.from({ length: 20 }, (_, i) => transport.send(sms(`behind it ${i}`, `7000${String(i).padStart(5, '0')}`)));
    await peer.until('the twenty behind it', () => peer.submitted.length === 20, 5_000);
    await Promise.all(others);
    const error = await refused;
    assert.ok(error instanceof TransientSendError && /ESME_RTHROTTLED/.test(error.message), String(error));
    // Throttled (the bind, it may be), then after the pause first in line again and throttled
    // again: to the back; the others were taken after it, so at its turn it is handed back.
    assert.equal(peer.throttledAt.length, 2);
    // Its next try (the worker's, after back-off) knows it was throttled: it waits behind the
    // others, and refused once they are taken, goes back.
    const again = transport.send({ ...sms('again', '700000999'), throttledBefore: true }).catch((error: unknown) => error);
    await Promise.all(Array.from({ length: 5 }, (_, i) => transport.send(sms(`after it ${i}`, `7001${String(i).padStart(5, '0')}`))));
    assert.ok((await again) instanceof TransientSendError);
    assert.equal(peer.submitted.length, 25);
    assert.equal(peer.throttledAt.length, 3);
  });

  test('an SMSC throttling by rate takes the first of each burst: the rest wait out the pauses, none goes back', async (t) => {
    const { peer, transport } = await setup(t, {}, { throttlePauseMs: 200 });
    await transport.ready();
    peer.takeOnly = 4;
    const sends = Array.from({ length: 10 }, (_, i) => transport.send(sms(`burst ${i}`)));
    await peer.until('six over the rate', () => peer.throttledAt.length >= 6);
    peer.takeOnly = 3; // after the pause: three more taken, the last three throttled again
    await peer.until('three more over the rate', () => peer.throttledAt.length >= 9);
    peer.takeOnly = null;
    const settled = await Promise.allSettled(sends);
    assert.deepEqual(
      settled.map((s) => s.status),
      Array(10).fill('fulfilled'),
      settled.map((s) => (s.status === 'rejected' ? String(s.reason) : 'ok')).join('; '),
    );
    assert.equal(peer.submitted.length, 10);
  });

  test('ESME_RMSGQFUL (a subscriber queue full) fails that message as transient and pauses nobody', async (t) => {
    const { peer, transport } = await setup(t, { queueFullDestinations: ['254700000888'] });
    await assert.rejects(transport.send(sms('to a full phone', '700000888')), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /ESME_RMSGQFUL \(0x14, message queue full\)/);
      return true;
    });
    assert.equal(transport.paused, false);
    assert.ok((await transport.send(sms('fine'))).providerId);
    assert.equal(peer.submitted.length, 1);
  });

  test('a send waits no longer than its notAfter: throttled, it gives up unsent when the message is no longer worth sending', async (t) => {
    const { peer, transport } = await setup(t, {}, { throttlePauseMs: 2_000 });
    await transport.ready();
    peer.throttling = true;
    const started = Date.now();
    await assert.rejects(transport.send({ ...sms('a payment prompt'), urgent: true, notAfter: Date.now() + 300 }), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /while the message was worth sending/);
      return true;
    });
    assert.ok(Date.now() - started < 1_900, 'not after the pause');
    assert.equal(peer.submitted.length, 0);
  });

  test('a fresh send joins the line behind those waiting for their paced turn, though the turn came before its timer', async (t) => {
    const { peer, transport } = await setup(t, {}, { maxSubmitsPerSecond: 10 });
    await transport.ready();
    const first = transport.send(sms('first'));
    const second = transport.send(sms('second')); // waits 100 ms for its turn
    // The event loop is busy past the turn (as under load), so the gate's timer has not fired
    // when a third send comes: it must go behind the second, not through the open gate.
    const until = performance.now() + 150;
    while (performance.now() < until);
    const third = transport.send(sms('third'));
    await Promise.all([first, second, third]);
    assert.deepEqual(
      peer.submitted.map((m) => m.text),
      ['first', 'second', 'third'],
    );
  });

  test('a throttled send keeps its place in line: after the pause the order is the order of arrival', async (t) => {
    // One on the wire at a time, so that the order does not hang on how soon the refusal comes back.
    const { peer, transport } = await setup(t, {}, { windowSize: 1, throttlePauseMs: 200 });
    await transport.ready();
    peer.throttleNext = 1;
    await Promise.all(Array.from({ length: 4 }, (_, i) => transport.send(sms(`in line ${i}`))));
    assert.equal(peer.throttledAt.length, 1);
    assert.deepEqual(
      peer.submitted.map((m) => m.text),
      ['in line 0', 'in line 1', 'in line 2', 'in line 3'],
    );
  });

  test('sends waiting in line when the link drops wait for it to come back, however long they waited', async (t) => {
    const { peer, transport } = await setup(
      t,
      {},
      { maxSubmitsPerSecond: 2, bindWaitMs: 1_000, reconnectMinMs: 800, reconnectMaxMs: 1_000 },
    );
    await transport.ready();
    const sends = Array.from({ length: 5 }, (_, i) => transport.send(sms(`queued ${i}`)));
    // Three answered and none on the wire: the other two have waited in line over bindWaitMs,
    // and the next turn comes while the link is still down.
    await peer.until('three answered', () => peer.submitted.length >= 3 && transport.inFlight === 0);
    peer.dropConnections();
    const settled = await Promise.allSettled(sends);
    const failures = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
    // None gives up for want of a bind. (On a stalled machine the next turn may come before
    // the drop is seen: that one went out on the dying link, and may have been taken.)
    assert.ok(
      failures.length === 0 || (failures.length === 1 && /closed before submit_sm_resp/.test(failures[0] ?? '')),
      failures.join('; '),
    );
    assert.equal(peer.binds, 2);
  });

  test('a submit_sm answered later than the other responses may take is waited for: one submit, no copy', async (t) => {
    const { peer, transport } = await setup(t, { submitDelayMs: 1_000 }, { responseTimeoutMs: 200 });
    const result = await transport.send(sms('slow but answered'));
    assert.equal(result.status, 'sent');
    assert.equal(peer.submitted.length, 1);
  });

  test('an unanswered submit_sm times out as a TransientSendError', async (t) => {
    const { transport } = await setup(t, { submitDelayMs: 1_000 }, { submitTimeoutMs: 200 });
    await assert.rejects(transport.send(sms('slow')), (error: Error) => {
      assert.ok(error instanceof TransientSendError);
      assert.match(error.message, /no submit_sm_resp .* within 200 ms/);
      return true;
    });
  });

  test('smpps:// binds over TLS', async (t) => {
    const peer = await startSmppPeer({ tls: true });
    const transport = new SmppTransport({ url: peer.url, tlsOptions: { ca: peer.certificate ?? '' } });
    t.after(async () => {
      await transport.close();
      await peer.close();
    });
    assert.match(peer.url, /^smpps:/);
    await transport.send(sms('over TLS'));
    assert.equal((await peer.waitFor(1))[0]?.text, 'over TLS');
  });

  test('2,000 pipelined sends complete', async (t) => {
    const { peer, transport } = await setup(t);
    await transport.ready();
    const count = 2_000;
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: count }, (_, i) => transport.send(sms(`Lipa bench message ${i}`, String(708000000 + i)))),
    );
    const seconds = (performance.now() - started) / 1000;
    t.diagnostic(`${count} submit_sm in ${(seconds * 1000).toFixed(0)} ms: ${Math.round(count / seconds)} SMS/s`);
    console.log(`smpp: ${count} pipelined submit_sm in ${(seconds * 1000).toFixed(0)} ms = ${Math.round(count / seconds)} SMS/s`);
    assert.equal(new Set(results.map((r) => r.providerId)).size, count);
    assert.equal(peer.submitted.length, count);
    assert.equal(peer.binds, 1);
  });
});
