import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.js';
import { admin, call, createMerchant, merchantSession, type Reply } from './helpers/client.js';
import { freshDatabase, type Lipa, ON_POSTGRES, startLipa } from './helpers/harness.js';
import {
  downServer,
  email,
  keysOf,
  loginOverSmtp,
  lookup,
  mailFor,
  messageRow,
  messagingKey,
  otpFromPeer,
  send,
  sleep,
  until,
  waitForStatus,
} from './helpers/messaging.js';
import { breakableDatabase } from './helpers/outage.js';
import { type ReceivedMail, type SmtpPeer, startSmtpPeer } from './helpers/smtp-peer.js';

/**
 * Email through the messaging API delivered for real to an SMTP server started by the test:
 * what arrives, refusals of the recipient, login codes, the service's own messages first,
 * and queueing and retries while the server is down.
 */

describe('messaging over SMTP', () => {
  let peer: SmtpPeer;
  let lipa: Lipa;
  let key: string;
  let token: string;
  before(async () => {
    // The peer offers no STARTTLS: the service verifies certificates and SMTP_URL has no way
    // to trust a self-signed one, so a STARTTLS peer here would never be delivered to.
    peer = await startSmtpPeer({
      rejectRecipients: ['nobody@example.com'],
      recipientReplies: {
        'gone@example.com': [550, '5.1.1 No such user'],
        'elsewhere@example.com': [550, '5.7.1 Relaying denied'],
        'sender-refused@example.com': [553, '5.1.8 <no-reply@lipa.local>: Sender address rejected: Domain not found'],
        'relay@example.com': [550, 'relay not permitted'],
        'rcpthosts@example.com': [553, "sorry, that domain isn't in my list of allowed rcpthosts"],
        'grey1@example.com': [450, '4.7.1 <grey1@example.com>: Recipient address rejected: Greylisted'],
        'grey2@example.com': [450, '4.7.1 <grey2@example.com>: Recipient address rejected: Greylisted'],
      },
    });
    lipa = await startLipa({ SMTP_URL: peer.url });
    const merchant = await createMerchant(lipa);
    token = await loginOverSmtp(lipa, peer, merchant);
    key = (await messagingKey(lipa, token)).apiKey;
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  test('a text email reaches the SMTP server with recipient, subject and body; the API answers 200 and GET shows sent', async () => {
    const reply = await send(lipa, key, email({ email: 'achieng@example.com', subject: 'Receipt 42', content: 'Paid KES 1,500.' }));
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
    assert.equal(reply.body.status, 'success');
    const id = reply.body.id;
    await until('the email at the SMTP server', () => mailFor(peer, id) !== undefined);
    const mail = mailFor(peer, id) as ReceivedMail;
    assert.deepEqual(mail.to, ['achieng@example.com']);
    assert.equal(mail.subject, 'Receipt 42');
    assert.equal(mail.contentType, 'text/plain');
    assert.equal(mail.text?.trim(), 'Paid KES 1,500.');
    assert.equal(mail.html, null);

    const data = await waitForStatus(lipa, key, id, ['sent']);
    assert.equal(data.status, 'sent');
    assert.equal(data.email, 'achieng@example.com');
  });

  test('content_type html arrives as text/html; the same HTML without content_type arrives as text/plain', async () => {
    const content = '<h1>Asante!</h1><p>Order <b>42</b> is paid.</p>';
    const asHtml = await send(lipa, key, email({ email: 'html@example.com', content, content_type: 'html' }));
    const asText = await send(lipa, key, email({ email: 'text@example.com', content }));
    assert.equal(asHtml.status, 200, asHtml.text);
    assert.equal(asText.status, 200, asText.text);
    await until('both emails', () => mailFor(peer, asHtml.body.id) !== undefined && mailFor(peer, asText.body.id) !== undefined);

    const html = mailFor(peer, asHtml.body.id) as ReceivedMail;
    assert.equal(html.contentType, 'text/html');
    assert.deepEqual(html.to, ['html@example.com']);
    assert.match(html.html ?? '', /<h1>Asante!<\/h1>/);

    const text = mailFor(peer, asText.body.id) as ReceivedMail;
    assert.equal(text.contentType, 'text/plain');
    assert.equal(text.html, null);
    assert.equal(text.text?.trim(), content, 'the markup arrives as literal text');

    assert.equal((await waitForStatus(lipa, key, asHtml.body.id, ['sent'])).content_type, 'html');
    assert.equal((await waitForStatus(lipa, key, asText.body.id, ['sent'])).content_type, 'text');
    // The operator's outbox tells them apart too.
    const outbox = (await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200')).body.data as Array<{
      id: string;
      contentType: string | null;
    }>;
    assert.equal(outbox.find((m) => m.id === asHtml.body.id)?.contentType, 'html');
    assert.equal(outbox.find((m) => m.id === asText.body.id)?.contentType, 'text');
  });

  test('a recipient the server says does not exist is the invalid-recipient 500, and the message is kept as failed', async () => {
    for (const [address, reason] of [
      ['nobody@example.com', 'Refused by the mail server: 550.'],
      ['gone@example.com', 'Refused by the mail server: 550 5.1.1.'],
    ]) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 500, reply.text);
      assert.equal(typeof reply.body, 'string', 'a bare JSON string, as for an address that fails the syntax check');
      assert.match(
        reply.body,
        new RegExp(`^The recipient email address is invalid: ${address} \\(the mail server refused it; message msg_`),
      );
      const id = /message (msg_[0-9A-Za-z_-]+)\)$/.exec(reply.body)?.[1] as string;
      const data = await waitForStatus(lipa, key, id, ['failed', 'sent', 'delivered']);
      assert.equal(data.status, 'failed');
      assert.equal(data.error, reason, 'the lookup says why, naming no host');
      const row = await messageRow(lipa, id);
      assert.match(row.last_error ?? '', /550/);
      assert.equal(row.attempts, 1, 'a permanent refusal is not retried');
      assert.equal(mailFor(peer, id), undefined);
    }
  });

  test('a refusal at RCPT TO about the sender or relaying (5.7.1, 5.1.8, a bare 550/553 saying so) is accepted-then-failed, not an invalid address', async () => {
    for (const [address, error] of [
      ['sender-refused@example.com', 'Refused by the mail server: 553 5.1.8.'],
      ['relay@example.com', 'Refused by the mail server: 550.'],
      ['rcpthosts@example.com', 'Refused by the mail server: 553.'],
    ]) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 200, `${address}: ${reply.text}`);
      const data = await waitForStatus(lipa, key, reply.body.id, ['failed', 'sent', 'delivered']);
      assert.deepEqual([data.status, data.error], ['failed', error], address);
    }
    const reply = await send(lipa, key, email({ email: 'elsewhere@example.com' }));
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.body.status, 'success');
    assert.match(reply.body.message, /refused/);
    const data = await waitForStatus(lipa, key, reply.body.id, ['failed', 'sent', 'delivered']);
    assert.equal(data.status, 'failed');
    assert.equal(data.error, 'Refused by the mail server: 550 5.7.1.');
    // The merchant's list shows the same, reason included.
    const listed = await call(lipa.url, 'GET', '/api/v1/messages?limit=200', { token });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.data.find((m: { id: string }) => m.id === reply.body.id),
      data,
    );
  });

  test('a transient refusal naming the recipient is logged once for all recipients, without their addresses', async () => {
    for (const address of ['grey1@example.com', 'grey2@example.com']) {
      const reply = await send(lipa, key, email({ email: address }));
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.body.message, 'Email accepted and queued for delivery');
    }
    const warnings = lipa.logs.filter((line) => line.includes('message not sent, will retry') && line.includes('450'));
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.ok(!/grey[12]@/.test(warnings[0] ?? ''), warnings[0]);
    assert.match(warnings[0] ?? '', /<address>/);
  });

  test('a merchant login OTP goes out over SMTP, works at confirm, and the stored copy hides the digits', async () => {
    const merchant = await createMerchant(lipa);
    const skip = peer.received.length;
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    assert.equal(started.status, 200, started.text);
    const { code, mail } = await otpFromPeer(peer, merchant.login, skip);
    assert.deepEqual(mail.to, [merchant.login]);
    assert.equal(mail.contentType, 'text/plain');

    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);
    assert.equal(typeof confirmed.body.token, 'string');

    type OutboxEntry = { to: string; purpose: string; content: string; status: string };
    let entry: OutboxEntry | undefined;
    await until('the OTP email recorded as sent', async () => {
      const outbox = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
      assert.equal(outbox.status, 200, outbox.text);
      entry = (outbox.body.data as OutboxEntry[]).find((m) => m.to === merchant.login && m.purpose === 'otp');
      return entry?.status === 'sent';
    });
    const stored = (entry as OutboxEntry).content;
    assert.ok(!stored.includes(code), `the code is not in the stored copy: ${stored}`);
    assert.doesNotMatch(stored, /[0-9]{6}/);
    assert.match(stored, /\*{6}/);
  });
});

describe("messaging over a slow SMTP server: the service's own messages first", () => {
  let peer: SmtpPeer;
  let lipa: Lipa;
  before(async () => {
    // Each message takes the server 300 ms; the service keeps 5 connections.
    peer = await startSmtpPeer({ replyDelayMs: 300 });
    lipa = await startLipa({ SMTP_URL: peer.url });
  });
  after(async () => {
    await lipa.close();
    await peer.close();
  });

  test("a login code goes out ahead of a merchant's backlog to the same server, and works", async () => {
    const merchant = await createMerchant(lipa);
    const token = await loginOverSmtp(lipa, peer, merchant);
    const key = (await messagingKey(lipa, token)).apiKey;
    const skip = peer.received.length;
    // 40 emails take the server at least 2.4 s; the API answers each within its 2 s wait.
    const backlog = Array.from({ length: 40 }, (_, i) => send(lipa, key, email({ email: `backlog${i}@example.com` })));
    await peer.waitFor(skip + 1);
    const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    assert.equal(started.status, 200, started.text);
    const arrivedBeforeCode = peer.received.length - skip;
    const { code, mail } = await otpFromPeer(peer, merchant.login, skip);
    const ahead = peer.received.slice(skip, peer.received.indexOf(mail)).length;
    // Those that had arrived when the code was queued, and at most two rounds of the 5 on the
    // wire while the worker picked it up; never the rest of the backlog.
    assert.ok(
      ahead <= arrivedBeforeCode + 10,
      `the code came after ${ahead} of the 40 backlog emails (${arrivedBeforeCode} when it was queued)`,
    );
    const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
    assert.equal(confirmed.status, 200, confirmed.text);

    for (const reply of await Promise.all(backlog)) assert.equal(reply.status, 200, reply.text);
    await peer.waitFor(skip + 41, 20_000);
    const backlogTo = new Set(peer.received.slice(skip).flatMap((m) => m.to.filter((to) => to.startsWith('backlog'))));
    assert.equal(backlogTo.size, 40, 'every backlog email arrived too');
  });
});

describe('messaging over a mail server that holds every merchant email for a long time', () => {
  test("one of the 5 connections is kept for the service's own messages: a login code goes out at once", async () => {
    const peer = await startSmtpPeer();
    const lipa = await startLipa({ SMTP_URL: peer.url });
    try {
      const merchant = await createMerchant(lipa);
      const key = (await messagingKey(lipa, await loginOverSmtp(lipa, peer, merchant))).apiKey;
      const skip = peer.received.length;
      // The server takes each email, then holds its answer for 8 s.
      peer.replyDelayMs = 8_000;
      const backlog = Array.from({ length: 8 }, (_, i) => send(lipa, key, email({ email: `held${i}@example.com` })));
      await until("the merchants' share of the connections taken", () => peer.received.length - skip >= 4);
      await sleep(300);
      assert.equal(peer.received.length - skip, 4, 'merchants hold 4 connections, never the fifth');
      peer.replyDelayMs = 0;
      // Within otpFromPeer's 5 s, long before any held connection is free.
      await loginOverSmtp(lipa, peer, merchant);
      for (const reply of await Promise.all(backlog)) assert.equal(reply.status, 200, reply.text);
      await peer.waitFor(skip + 9, 30_000);
    } finally {
      await lipa.close();
      await peer.close();
    }
  });
});

describe('messaging while the SMTP server is unreachable', () => {
  let down: Awaited<ReturnType<typeof downServer>>;
  let lipa: Lipa;
  let key: string;
  let peer: SmtpPeer | null = null;
  before(async () => {
    down = await downServer();
    lipa = await startLipa({ SMTP_URL: `smtp://127.0.0.1:${down.port}` });
    // The login OTP email is queued too (its stored copy sealed, not yet sent).
    const session = await merchantSession(lipa);
    key = (await messagingKey(lipa, session.token)).apiKey;
    // Drop it, so that the only message retried here is the test's own: a retry still running
    // when the service closes would end in an unhandled rejection (see the Messenger's worker).
    await lipa.ctx.store.db.deleteFrom('messages').where('purpose', '=', 'otp').execute();
  });
  after(async () => {
    await lipa.close();
    await peer?.close();
    await down.release();
  });

  test('an email is stored and queued, retried with back-off, and sent once a server listens', async () => {
    const reply = await send(lipa, key, email({ email: 'later@example.com', subject: 'Queued' }));
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
    assert.equal(reply.body.status, 'success');
    const id = reply.body.id;

    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    // The answer waited up to 2 s for the first attempt; under load its outcome may come later.
    await until('the first attempt', async () => (await messageRow(lipa, id)).attempts >= 1, 6_000);
    const first = await messageRow(lipa, id);
    assert.equal(first.status, 'queued');
    assert.ok(first.attempts >= 1, `attempts ${first.attempts}`);
    assert.ok((first.last_error ?? '').length > 0, 'last_error is set');
    assert.ok(first.next_attempt_at > first.updated_at, 'the next try is later');

    await until('a second attempt', async () => (await messageRow(lipa, id)).attempts >= 2, 6_000);
    const second = await messageRow(lipa, id);
    assert.equal(second.status, 'queued');
    assert.ok((second.last_error ?? '').length > 0);
    // Back-off: the gap after the second attempt is longer than after the first (2 s, then 4 s, ±20 %).
    assert.ok(
      second.next_attempt_at - second.updated_at > first.next_attempt_at - first.updated_at,
      `back-off grows: ${first.next_attempt_at - first.updated_at} then ${second.next_attempt_at - second.updated_at}`,
    );
    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    // The operator is told why, once a minute for the same failure, not once a try.
    const warnings = lipa.logs.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'message not sent, will retry');
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0].level, 40);
    assert.equal(warnings[0].type, 'email');
    assert.match(warnings[0].error, new RegExp(`smtp://127\\.0\\.0\\.1:${down.port}`));

    await down.release();
    peer = await startSmtpPeer({ port: down.port });
    const data = await waitForStatus(lipa, key, id, ['sent', 'failed'], 12_000);
    assert.equal(data.status, 'sent');
    const mail = mailFor(peer, id);
    assert.deepEqual(mail?.to, ['later@example.com']);
    assert.equal(mail?.subject, 'Queued');
    const done = await messageRow(lipa, id);
    assert.ok(done.attempts >= 3, `attempts ${done.attempts}`);
    assert.equal(done.last_error, null);
  });
});

describe('messaging when the SMTP server stays unreachable for the whole retry window', () => {
  let down: Awaited<ReturnType<typeof downServer>>;
  let lipa: Lipa;
  before(async () => {
    down = await downServer();
    lipa = await startLipa({ SMTP_URL: `smtp://127.0.0.1:${down.port}`, MESSAGE_RETRY_WINDOW_SECONDS: '5' });
  });
  after(async () => {
    await lipa.close();
    await down.release();
  });

  test('it is retried until the window ends, then failed with a reason that names no internal host', async () => {
    const session = await merchantSession(lipa);
    const key = (await messagingKey(lipa, session.token)).apiKey;
    await lipa.ctx.store.db.deleteFrom('messages').where('purpose', '=', 'otp').execute();
    const reply = await send(lipa, key, email({ email: 'never@example.com' }));
    assert.equal(reply.status, 200, reply.text);
    const id = reply.body.id;
    assert.equal((await lookup(lipa, key, id)).body.data.status, 'queued');
    const data = await waitForStatus(lipa, key, id, ['failed', 'sent'], 20_000);
    assert.equal(data.status, 'failed');
    const row = await messageRow(lipa, id);
    assert.ok(row.attempts >= 2, `retried: ${row.attempts} tries`);
    assert.ok(Date.now() - Date.parse(data.created_at) >= 4_000, 'not failed before its window (about 5 s) ended');
    assert.match(row.last_error ?? '', /gave up after \d+ tries in 5 s; the last: /, 'the operator keeps the detail');
    assert.match(data.error ?? '', /^Not sent: the mail server could not be reached/);
    assert.ok(!(data.error ?? '').includes('127.0.0.1'), data.error);
  });
});

describe('stopping during a backlog to a slow mail server', () => {
  test('the sends on the wire finish, the rest stay queued; the next start sends each once', async () => {
    const database = await freshDatabase();
    // One message a second per connection: 40 emails would keep the 5 connections busy 8 s.
    const peer = await startSmtpPeer({ replyDelayMs: 1_000 });
    try {
      const first = await startLipa({ DATABASE_URL: database.url, SMTP_URL: peer.url });
      const session = await merchantSession(first);
      const key = (await messagingKey(first, session.token)).apiKey;
      const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => send(first, key, email({ email: `stop${i}@example.com` }))));
      for (const reply of replies) assert.equal(reply.status, 200, reply.text);
      const ids = replies.map((r) => r.body.id as string);
      const beforeStop = peer.received.length;
      await first.close();
      // Only what was on the wire went out while stopping: one a connection, and at most one
      // more round begun before the stop came (not the ~25 still waiting for a connection).
      assert.ok(peer.received.length - beforeStop <= 10, `${peer.received.length - beforeStop} emails sent while stopping`);

      // Those left were not tried: still queued as they were, with no try counted.
      const store = await openDatabase(database.url);
      const left = await store.db.selectFrom('messages').select(['status', 'attempts', 'last_error']).where('id', 'in', ids).execute();
      await store.close();
      const queued = left.filter((m) => m.status === 'queued');
      assert.ok(queued.length >= 20, `${queued.length} left queued`);
      assert.deepEqual(new Set(queued.map((m) => `${m.attempts} ${m.last_error}`)), new Set(['0 null']));

      peer.replyDelayMs = 0;
      const second = await startLipa({ DATABASE_URL: database.url, SMTP_URL: peer.url });
      try {
        await until(
          'every email at the server',
          () => ids.every((id) => peer.received.some((m) => m.headers['x-lipa-message-id'] === id)),
          20_000,
        );
        const copies = ids.map((id) => peer.received.filter((m) => m.headers['x-lipa-message-id'] === id).length);
        assert.deepEqual(
          copies.filter((n) => n !== 1),
          [],
          'each email arrived exactly once',
        );
      } finally {
        await second.close();
      }
    } finally {
      await peer.close();
      await database.drop();
    }
  });
});

/**
 * The email `reply` answered for (200) was sent after one try, reached the server once, and
 * its record waited for the database (the warning says so).
 */
async function recordedOnceBack(lipa: Lipa, peer: SmtpPeer, key: string, reply: Reply): Promise<void> {
  assert.equal(reply.status, 200, reply.text);
  const id = reply.body.id as string;
  assert.equal((await waitForStatus(lipa, key, id, ['sent'], 5_000)).status, 'sent');
  assert.equal((await messageRow(lipa, id)).attempts, 1);
  assert.equal(peer.received.filter((m) => m.headers['x-lipa-message-id'] === id).length, 1, 'sent once');
  assert.ok(lipa.logs.some((line) => /"level":40.*attempts are recorded once it is back/.test(line)));
}

describe('the database lost while an email is on the wire', () => {
  test("the server's answer is recorded once the database is back: the API still answers, sent after one try, sent once", async () => {
    const database = await breakableDatabase();
    // The server takes the email, then answers 1 s later: the database goes in between.
    const peer = await startSmtpPeer({ replyDelayMs: 1_000 });
    const lipa = await startLipa({ DATABASE_URL: database.url, SMTP_URL: peer.url });
    try {
      const session = await merchantSession(lipa);
      const key = (await messagingKey(lipa, session.token)).apiKey;
      const answer = send(lipa, key, email({ email: 'outage@example.com', subject: 'During an outage' }));
      await until('the email at the server', () => peer.received.some((m) => m.subject === 'During an outage'));
      await database.down(lipa.ctx.store);
      await sleep(1_500);
      await database.up(lipa.ctx.store);

      // Stored before the outage: the merchant gets the message's id, not a 500 to retry.
      await recordedOnceBack(lipa, peer, key, await answer);
    } finally {
      await lipa.close();
      await peer.close();
      await database.drop();
    }
  });
});

// PostgreSQL only: SQLite commits inside the process, with no answer to lose on the way.
if (ON_POSTGRES) {
  describe("PostgreSQL: the answer to an email attempt's record lost on the way back", () => {
    test('the record is tried again and finds itself committed: sent after one try, sent once, no "lease had run out"', async () => {
      const database = await breakableDatabase();
      const peer = await startSmtpPeer();
      const lipa = await startLipa({ DATABASE_URL: database.url, SMTP_URL: peer.url });
      try {
        const session = await merchantSession(lipa);
        const key = (await messagingKey(lipa, session.token)).apiKey;
        const lost = database.loseCommitAnswer(/update "messages" set "status"/);
        const reply = await send(lipa, key, email({ email: 'lost-answer@example.com', subject: 'A lost answer' }));
        await lost;
        // The record is tried again within 0.1 s of the loss.
        await sleep(1_000);
        await recordedOnceBack(lipa, peer, key, reply);
        assert.ok(!lipa.logs.some((line) => /lease had run out|"level":50/.test(line)));
      } finally {
        await lipa.close();
        await peer.close();
        await database.drop();
      }
    });
  });
}

describe('a first attempt whose record fails for another reason than an outage', () => {
  test('the API still answers with the stored message (200, queued), never a 500, and the log says why', async () => {
    const peer = await startSmtpPeer();
    const lipa = await startLipa({ SMTP_URL: peer.url });
    const db = lipa.ctx.store.db;
    try {
      const session = await merchantSession(lipa);
      const key = (await messagingKey(lipa, session.token)).apiKey;
      // The database refuses every change of a message's status (as a bug in the record would).
      if (lipa.ctx.store.dialect === 'sqlite') {
        await sql`create trigger refuse_record before update of status on messages begin select raise(abort, 'refused by a test trigger'); end`.execute(
          db,
        );
      } else {
        await sql`create function refuse_record() returns trigger language plpgsql as $$ begin raise exception 'refused by a test trigger'; end $$`.execute(
          db,
        );
        await sql`create trigger refuse_record before update of status on messages for each row execute function refuse_record()`.execute(
          db,
        );
      }
      const reply = await send(lipa, key, email({ email: 'unrecorded@example.com' }));
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(keysOf(reply.body), ['id', 'message', 'status']);
      assert.equal(reply.body.status, 'success');
      assert.ok(lipa.logs.some((line) => /"level":50.*refused by a test trigger.*message attempt not recorded/.test(line)));
      assert.equal((await messageRow(lipa, reply.body.id)).status, 'queued', 'stored, its record refused');
    } finally {
      await sql`drop trigger if exists refuse_record${sql.raw(lipa.ctx.store.dialect === 'sqlite' ? '' : ' on messages')}`.execute(db);
      await lipa.close();
      await peer.close();
    }
  });
});
