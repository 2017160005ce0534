import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { describe, type TestContext, test } from 'node:test';
import { SmtpTransport, type SmtpTransportOptions } from '../src/messaging/transports/smtp.js';
import { parseSmtpUrl } from '../src/messaging/transports/smtp-url.js';
import { type OutboundEmail, PermanentSendError, TransientSendError, TransportClosedError } from '../src/messaging/transports/transport.js';
import { type SmtpPeer, type SmtpPeerOptions, startSmtpPeer } from './helpers/smtp-peer.js';

/** Email over SMTP (CONTRACT §8): the real transport against a real SMTP server. */

function email(overrides: Partial<OutboundEmail> = {}): OutboundEmail {
  return {
    id: randomUUID(),
    to: 'customer@example.com',
    subject: 'Your receipt',
    contentType: 'text',
    content: 'Thank you for your payment.',
    createdAt: Date.now(),
    ...overrides,
  };
}

const cleanups = new WeakMap<TestContext, (() => Promise<void>)[]>();

/** Runs `fn` when the test ends, last registered first (transports close before their server). */
function onCleanup(t: TestContext, fn: () => Promise<void>): void {
  let list = cleanups.get(t);
  if (!list) {
    const fns: (() => Promise<void>)[] = [];
    list = fns;
    cleanups.set(t, fns);
    t.after(async () => {
      for (const cleanup of fns.reverse()) await cleanup();
    });
  }
  list.push(fn);
}

async function peerFor(t: TestContext, options: SmtpPeerOptions = {}): Promise<SmtpPeer> {
  const peer = await startSmtpPeer(options);
  onCleanup(t, () => peer.close());
  return peer;
}

function transportFor(t: TestContext, url: string, options: SmtpTransportOptions = {}): SmtpTransport {
  const transport = new SmtpTransport(url, options);
  onCleanup(t, () => transport.close());
  return transport;
}

describe('SMTP transport', () => {
  test('a text email arrives as text/plain with recipient, subject, body and correlation header', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url);
    const message = email({ createdAt: Date.parse('2026-11-22T06:30:15Z') });
    const result = await transport.send(message);
    assert.equal(result.status, 'sent');
    assert.match(result.providerId ?? '', /^<.+@.+>$/);

    const [mail] = await peer.waitFor(1);
    assert.ok(mail);
    assert.deepEqual(mail.to, ['customer@example.com']);
    assert.equal(mail.from, 'no-reply@lipa.local');
    assert.equal(mail.headers.from, 'Lipa <no-reply@lipa.local>');
    assert.equal(mail.headers.to, 'customer@example.com');
    assert.equal(mail.subject, 'Your receipt');
    assert.equal(mail.contentType, 'text/plain');
    assert.equal(mail.text?.trim(), 'Thank you for your payment.');
    assert.equal(mail.html, null);
    assert.equal(mail.headers['x-lipa-message-id'], message.id);
    assert.equal(mail.headers['message-id'], result.providerId);
    assert.equal(Date.parse(mail.headers.date ?? ''), message.createdAt, 'the Date header is when the message was accepted');
  });

  test('a subject that looks like an encoded word arrives as written, not decoded into something else', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url);
    const subjects = [
      '=?UTF-8?B?QmNjOiB4QGV2aWwuY29t?=',
      `Receipt =?ISO-8859-1?Q?caf=E9?= and ${'a long tail with é and 😀 '.repeat(6)}`.trim(),
    ];
    for (const subject of subjects) await transport.send(email({ subject }));
    const mails = await peer.waitFor(2);
    assert.deepEqual(
      mails.map((m) => m.subject),
      subjects,
    );
    assert.match(mails[0]?.headers.subject ?? '', /^=\?UTF-8\?B\?/, 'sent encoded');
  });

  test('an html email arrives as text/html', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url, { from: 'Shop <shop@example.org>' });
    const content = '<p>Paid <b>KES 100</b></p>';
    await transport.send(email({ contentType: 'html', content, subject: 'Paid' }));
    const [mail] = await peer.waitFor(1);
    assert.ok(mail);
    assert.equal(mail.contentType, 'text/html');
    assert.equal(mail.html?.trim(), content);
    assert.equal(mail.text, null);
    assert.equal(mail.subject, 'Paid');
    assert.equal(mail.from, 'shop@example.org');
    assert.equal(mail.headers.from, 'Shop <shop@example.org>');
  });

  test('html-looking content with content type text arrives as text/plain, not rendered', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url);
    const content = '<h1>Hello</h1><script>alert(1)</script>';
    await transport.send(email({ contentType: 'text', content }));
    const [mail] = await peer.waitFor(1);
    assert.ok(mail);
    assert.equal(mail.contentType, 'text/plain');
    assert.equal(mail.text?.trim(), content);
    assert.equal(mail.html, null);
  });

  test('unicode subject and body survive; a CR/LF in the subject cannot add a header', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url);
    await transport.send(email({ subject: 'Malipo ✓ — asante\r\nBcc: victim@example.com', content: 'Habari, 100 KSh ✓' }));
    const [mail] = await peer.waitFor(1);
    assert.ok(mail);
    assert.deepEqual(mail.to, ['customer@example.com']);
    assert.equal(mail.headers.bcc, undefined);
    assert.match(mail.subject, /^Malipo ✓ — asante\s+Bcc: victim@example\.com$/);
    assert.equal(mail.text?.trim(), 'Habari, 100 KSh ✓');
  });

  test('a recipient that is not one plain address is refused for good, before any SMTP', async (t) => {
    const peer = await peerFor(t);
    const transport = transportFor(t, peer.url);
    for (const to of ['a@example.com, b@example.com', 'Eve <eve@example.com>', 'no-at-sign', 'a@example.com\r\nBcc: b@x.com']) {
      await assert.rejects(transport.send(email({ to })), PermanentSendError, to);
    }
    assert.equal(peer.received.length, 0);
  });

  test('AUTH with user and password (URL-decoded) works', async (t) => {
    const auth = { user: 'lipa@example.com', pass: 'p@ss:w/rd %41' };
    const peer = await peerFor(t, { auth });
    assert.match(peer.url, /^smtp:\/\/lipa%40example\.com:p%40ss%3Aw%2Frd%20%2541@127\.0\.0\.1:\d+$/);
    // The peer offers no STARTTLS: plain AUTH is allowed to this machine (there is no network to cross).
    const transport = transportFor(t, peer.url);
    await transport.send(email());
    const [mail] = await peer.waitFor(1);
    assert.equal(mail?.user, 'lipa@example.com');
  });

  test('a wrong password fails without the password in the error', async (t) => {
    const peer = await peerFor(t, { auth: { user: 'lipa', pass: 'right-password' } });
    const password = 'Wr0ng-S3cret-Pa55';
    const url = peer.url.replace('right-password', password);
    const transport = transportFor(t, url);
    const error = await transport.send(email()).then(
      () => assert.fail('expected the send to fail'),
      (e: unknown) => e,
    );
    // Bad credentials are the service's setup, not the message's fault: retry once fixed.
    assert.ok(error instanceof TransientSendError, String(error));
    assert.match(error.message, /535|auth|login/i);
    assert.doesNotMatch(error.message, new RegExp(password));
    assert.ok(!error.message.includes(Buffer.from(password).toString('base64')));
    assert.ok(!error.message.includes(Buffer.from(`\u0000lipa\u0000${password}`).toString('base64')));
    assert.equal(peer.received.length, 0);
  });

  test('credentials never go out in clear: without STARTTLS nothing is sent and AUTH is never tried', async (t) => {
    const peer = await peerFor(t, { auth: { user: 'lipa', pass: 'secret' } });
    // The peer stands for a server across a network: its loopback exemption is turned off.
    const transport = transportFor(t, peer.url, { exemptLoopback: false });
    const error = await transport.send(email()).then(
      () => assert.fail('expected the send to fail'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof TransientSendError, String(error));
    assert.match(error.message, /STARTTLS/);
    assert.equal(peer.authAttempts, 0, 'the password was never sent');
    assert.equal(peer.received.length, 0);
    // Who needs STARTTLS: with credentials, any server but this machine; in production
    // (requireTls: always), every server but this machine; smtps:// is TLS already.
    const requiresTls = (url: string, requireTls?: 'always') => transportFor(t, url, requireTls ? { requireTls } : {}).requiresTls;
    const remote = peer.url.replace('127.0.0.1', 'mail.example.com');
    const anonymous = (url: string) => url.replace(/\/\/[^@]*@/, '//');
    assert.equal(requiresTls(remote), true);
    assert.equal(requiresTls(peer.url.replace('127.0.0.1', '127.0.0.2')), false);
    assert.equal(requiresTls(peer.url.replace('127.0.0.1', '[::1]')), false);
    assert.equal(requiresTls(peer.url.replace('127.0.0.1', 'localhost')), true, 'a name is resolved by DNS: not exempt');
    assert.equal(requiresTls(anonymous(remote)), false, 'staging, no credentials: opportunistic TLS');
    assert.equal(requiresTls(anonymous(remote), 'always'), true, 'production: every message');
    assert.equal(requiresTls(anonymous(peer.url), 'always'), false, 'production, this machine');
    assert.equal(requiresTls(remote.replace('smtp://', 'smtps://'), 'always'), false, 'TLS from the start');
  });

  test('STARTTLS is used when the server offers it', async (t) => {
    const peer = await peerFor(t, { starttls: true, auth: { user: 'lipa', pass: 'secret' } });
    const transport = transportFor(t, peer.url, { rejectUnauthorized: false });
    await transport.send(email());
    const [mail] = await peer.waitFor(1);
    assert.equal(mail?.secure, true);
    assert.equal(mail?.user, 'lipa');

    // And a server that does not offer it gets the message in clear (opportunistic TLS).
    const plainPeer = await peerFor(t);
    const plain = transportFor(t, plainPeer.url);
    await plain.send(email());
    const [clear] = await plainPeer.waitFor(1);
    assert.equal(clear?.secure, false);
  });

  test('an untrusted STARTTLS certificate fails by default instead of sending in clear', async (t) => {
    const peer = await peerFor(t, { starttls: true });
    const transport = transportFor(t, peer.url);
    await assert.rejects(transport.send(email()), TransientSendError);
    assert.equal(peer.received.length, 0);
  });

  test('a 550-rejected recipient is a permanent failure', async (t) => {
    const peer = await peerFor(t, { rejectRecipients: ['gone@example.com'] });
    const transport = transportFor(t, peer.url);
    await assert.rejects(transport.send(email({ to: 'gone@example.com' })), (error: unknown) => {
      assert.ok(error instanceof PermanentSendError, String(error));
      assert.match(error.message, /550/);
      return true;
    });
    // The pooled connection is still good for the next message.
    await transport.send(email({ to: 'here@example.com' }));
    const [mail] = await peer.waitFor(1);
    assert.deepEqual(mail?.to, ['here@example.com']);
  });

  test('a 451 answer is a transient failure; the retry goes through', async (t) => {
    const peer = await peerFor(t, { failNext: 1 });
    const transport = transportFor(t, peer.url);
    const message = email();
    await assert.rejects(transport.send(message), (error: unknown) => {
      assert.ok(error instanceof TransientSendError, String(error));
      assert.match(error.message, /451/);
      return true;
    });
    assert.equal(peer.received.length, 0);
    await transport.send(message);
    const [mail] = await peer.waitFor(1);
    assert.equal(mail?.headers['x-lipa-message-id'], message.id);
  });

  test('a server that is down is a transient failure', async (t) => {
    const peer = await startSmtpPeer();
    const url = peer.url;
    await peer.close();
    const transport = transportFor(t, url, { timeoutMs: 2_000 });
    await assert.rejects(transport.send(email()), TransientSendError);
  });

  test('a server that never answers is a transient failure after the timeout', async (t) => {
    const sockets = new Set<Socket>();
    const silent = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    onCleanup(
      t,
      () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy();
          silent.close(() => resolve());
        }),
    );
    const { port } = silent.address() as AddressInfo;
    const transport = transportFor(t, `smtp://127.0.0.1:${port}`, { timeoutMs: 300 });
    await assert.rejects(transport.send(email()), TransientSendError);
  });

  test('a server slow to answer the end of the message is waited for (RFC 5321: 10 minutes), not sent a copy', async (t) => {
    const peer = await peerFor(t, { replyDelayMs: 1_500 });
    const transport = transportFor(t, peer.url, { timeoutMs: 300 });
    const result = await transport.send(email());
    assert.equal(result.status, 'sent');
    assert.equal(peer.received.length, 1);
  });

  test("with every connection busy, the service's own messages go next, and a send that waits too long gives up unsent", async (t) => {
    const peer = await peerFor(t, { replyDelayMs: 1_000 });
    const transport = transportFor(t, peer.url, { poolSize: 1, slotWaitMs: 2_500 });
    const first = transport.send(email({ subject: 'merchant 1' }));
    const queued = [transport.send(email({ subject: 'merchant 2' })), transport.send(email({ subject: 'merchant 3' }))];
    const own = transport.send({ ...email({ subject: 'login code' }), urgent: true });
    const outcomes = await Promise.allSettled([first, own, ...queued]);
    // One connection, 1 s a message: the login code goes second; of the two merchant emails
    // behind it, the one still waiting after 2.5 s fails, never sent.
    assert.deepEqual(
      peer.received.map((m) => m.subject),
      ['merchant 1', 'login code', 'merchant 2'],
    );
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
    );
    const refused = outcomes[3] as PromiseRejectedResult;
    assert.ok(refused.reason instanceof TransientSendError);
    assert.match(refused.reason.message, /no free connection to smtp:\/\/127\.0\.0\.1:[0-9]+ within 2.5 s/);
    await transport.close();
    await assert.rejects(transport.send(email()), /closed/);
  });

  test('close() while a send holds its connection but has not reached the server: close() waits for it, refuses the rest, sends nothing after', async (t) => {
    const peer = await peerFor(t, { replyDelayMs: 400 });
    const transport = transportFor(t, peer.url, { poolSize: 1 });
    const settled: string[] = [];
    const first = transport.send(email({ subject: 'on the wire' }));
    const waiting = Promise.allSettled([
      transport.send(email({ subject: 'merchant' })),
      transport.send({ ...email({ subject: 'login code' }), urgent: true }).finally(() => settled.push('login code')),
    ]);
    // The first send's end hands its connection to the login code, which holds it from then
    // on; close() comes in the same turn, before the login code reaches the server. close()
    // must wait for it (and not close the pool under it); the merchant email still waiting
    // is refused.
    let closing: Promise<void> | undefined;
    await first.then(() => {
      closing = transport.close().then(() => void settled.push('closed'));
    });
    await closing;
    assert.deepEqual(settled, ['login code', 'closed']);
    const [merchant, own] = await waiting;
    assert.equal(own?.status, 'fulfilled');
    assert.equal(merchant?.status, 'rejected');
    assert.ok((merchant as PromiseRejectedResult).reason instanceof TransportClosedError);
    assert.deepEqual(
      peer.received.map((m) => m.subject),
      ['on the wire', 'login code'],
    );
  });

  test('200 concurrent sends all arrive over the pool', async (t) => {
    const peer = await peerFor(t, { starttls: true, auth: { user: 'lipa', pass: 'secret' } });
    const transport = transportFor(t, peer.url, { rejectUnauthorized: false, poolSize: 5 });
    const messages = Array.from({ length: 200 }, (_, i) => email({ to: `user${i}@example.com`, subject: `Message ${i}` }));
    const started = performance.now();
    const results = await Promise.all(messages.map((m) => transport.send(m)));
    const seconds = (performance.now() - started) / 1000;
    await peer.waitFor(200);
    t.diagnostic(`200 emails over STARTTLS+AUTH, pool of 5: ${seconds.toFixed(2)} s, ${(200 / seconds).toFixed(0)} emails/s`);

    assert.ok(results.every((r) => r.status === 'sent'));
    assert.equal(new Set(results.map((r) => r.providerId)).size, 200);
    const ids = new Set(peer.received.map((m) => m.headers['x-lipa-message-id']));
    assert.deepEqual(ids, new Set(messages.map((m) => m.id)));
    for (const mail of peer.received) {
      const i = Number(mail.subject.replace('Message ', ''));
      assert.deepEqual(mail.to, [`user${i}@example.com`]);
      assert.equal(mail.secure, true);
    }
    const sessions = new Set(peer.received.map((m) => m.sessionId)).size;
    assert.ok(sessions > 1 && sessions <= 5, `${sessions} SMTP sessions used`);
  });
});

describe('parseSmtpUrl', () => {
  test('reads host, port, TLS mode and URL-decoded credentials', () => {
    assert.deepEqual(parseSmtpUrl('smtp://user%40x.com:p%3Ass@mail.example.com:2525'), {
      secure: false,
      host: 'mail.example.com',
      port: 2525,
      user: 'user@x.com',
      pass: 'p:ss',
    });
    assert.deepEqual(parseSmtpUrl('smtp://mail.example.com'), {
      secure: false,
      host: 'mail.example.com',
      port: 587,
      user: null,
      pass: null,
    });
    assert.deepEqual(parseSmtpUrl('smtps://u@[::1]'), { secure: true, host: '::1', port: 465, user: 'u', pass: null });
  });

  test('refuses bad URLs with a clear message that never repeats the password', () => {
    const cases: [string, RegExp][] = [
      ['not a url', /smtp:\/\/user:pass@/],
      ['http://user:hunter2@mail.example.com', /must start with smtp:\/\/ .* or smtps:\/\//],
      ['smtp://user:hunter2@mail.example.com:587/path', /path, query or fragment/],
      ['smtp://user:hunter2@mail.example.com?tls=no', /path, query or fragment/],
      ['smtp://user:%E0%A4%A@mail.example.com', /percent-encoded/],
      ['smtp://:hunter2@mail.example.com', /password but no user/],
    ];
    for (const [url, message] of cases) {
      assert.throws(
        () => parseSmtpUrl(url),
        (error: unknown) => {
          assert.ok(error instanceof Error);
          assert.match(error.message, message, url);
          assert.doesNotMatch(error.message, /hunter2/);
          return true;
        },
      );
    }
    assert.throws(() => new SmtpTransport('smtp://host', { poolSize: 0 }), /poolSize/);
  });
});
