import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Db, openDatabase } from '../src/db/database.js';
import { createLogger } from '../src/logger.js';
import { Messenger } from '../src/messaging/messenger.js';
import { SmtpTransport } from '../src/messaging/transports/smtp.js';
import { SecretBox } from '../src/security/secret-box.js';
import { freshDatabase } from './helpers/harness.js';
import { breakableDatabase } from './helpers/outage.js';
import { type SmtpPeer, startSmtpPeer } from './helpers/smtp-peer.js';

/** A merchant's email to `address`, as the messaging API stores it. */
const emailTo = (address: string) => ({
  merchant_id: null,
  messaging_key_id: null,
  purpose: 'api',
  type: 'email' as const,
  email: address,
  subject: 'Slow server',
  content_type: 'text' as const,
  phone_country_code: null,
  phone_number: null,
  content: 'Once only',
  segments: null,
});

/** The worker's loop, faster than the service's: every claim it can make, it makes (a failed one is tried again). */
function runWorker(messenger: Messenger): { stop(): Promise<void> } {
  let working = true;
  const loop = (async () => {
    while (working) {
      await messenger.deliverDue().catch(() => undefined);
      await sleep(50);
    }
  })();
  return {
    stop: async () => {
      working = false;
      await loop;
    },
  };
}

/** A Messenger sending email through `transport` under a 0.9 s lease. */
function leasedMessenger(store: Db, transport: SmtpTransport): Messenger {
  return new Messenger(
    store,
    createLogger('silent'),
    { email: transport, sms: null },
    new SecretBox(randomBytes(32)),
    Date.now,
    () => 86_400_000,
    900,
  );
}

/** Resolves once the mail server has the message (at most 5 s). */
async function atServer(peer: SmtpPeer): Promise<void> {
  const deadline = Date.now() + 5000;
  while (peer.received.length === 0 && Date.now() < deadline) await sleep(10);
}

/** The message went out once and was recorded sent, after one try. */
async function assertSentOnce(store: Db, id: string, peer: SmtpPeer): Promise<void> {
  const sent = await store.db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  assert.equal(sent.status, 'sent');
  assert.equal(sent.attempts, 1, 'one try, recorded once');
  assert.equal(peer.received.length, 1, 'the server got it once');
}

describe('a message on the wire keeps its lease', () => {
  test('a mail server slower than the lease gets the message once, under one Message-ID, recorded once, among failing units', async () => {
    const database = await freshDatabase();
    const store = await openDatabase(database.url);
    // The server answers each message 2.5 s after it arrives; a lease lasts 0.9 s.
    const peer = await startSmtpPeer({ replyDelayMs: 2500 });
    const transport = new SmtpTransport(peer.url, { timeoutMs: 10_000 });
    const messenger = leasedMessenger(store, transport);
    try {
      const message = await store.write((tx) => messenger.enqueue(tx, emailTo('slow@duka.example'), Date.now(), false));
      // Meanwhile other units keep failing: on SQLite some share a batch with a renewal, which
      // then runs again (group commit re-runs a batch unit by unit when one fails).
      let neighbours = true;
      const failing = (async () => {
        while (neighbours) {
          store
            .write(async (tx) => {
              await tx.selectFrom('messages').select('id').execute();
              throw new Error('a business rule says no');
            })
            .catch(() => undefined);
          await sleep(2);
        }
      })();
      // The worker's loop, faster than the service's: every claim it can make, it makes.
      const row = async () => store.db.selectFrom('messages').selectAll().where('id', '=', message.id).executeTakeFirstOrThrow();
      const deadline = Date.now() + 8000;
      while ((await row()).status === 'queued' && Date.now() < deadline) {
        await messenger.deliverDue();
        await sleep(50);
      }
      // Two more leases' worth of claims: nothing is left to send.
      for (let i = 0; i < 40; i++) {
        await messenger.deliverDue();
        await sleep(50);
      }
      neighbours = false;
      await failing;
      const sent = await row();
      assert.equal(sent.status, 'sent');
      assert.equal(sent.attempts, 1, 'one try, recorded once');
      assert.equal(peer.received.length, 1, 'the server got it once');
      assert.equal(peer.received[0]?.headers['message-id'], `<${message.id}@lipa.local>`);
      assert.equal(sent.provider_id, `<${message.id}@lipa.local>`);
    } finally {
      await messenger.close();
      await peer.close();
      await store.close();
      await database.drop();
    }
  });
});

describe('a database outage longer than the lease, with a message on the wire', () => {
  // A lease lasts 0.9 s; the database is gone for 2 s from the message's arrival at the
  // server, so the lease runs out during the outage (renewing it fails). The server answers
  // during the outage, or only after the database is back.
  for (const [when, replyDelayMs] of [
    ['during the outage', 300],
    ['after the database is back', 3_000],
  ] as const) {
    test(`the server answering ${when}: recorded once the database is back, never sent again by this process`, async () => {
      const database = await breakableDatabase();
      const store = await openDatabase(database.url);
      const peer = await startSmtpPeer({ replyDelayMs });
      const transport = new SmtpTransport(peer.url, { timeoutMs: 10_000 });
      const messenger = leasedMessenger(store, transport);
      try {
        const message = await store.write((tx) => messenger.enqueue(tx, emailTo('outage@duka.example'), Date.now(), false));
        // Its claims fail while the database is gone.
        const worker = runWorker(messenger);
        await atServer(peer);
        await database.down(store);
        await sleep(2000);
        await database.up(store);
        // Two more leases' worth of claims after the database is back, and the server's answer.
        await sleep(replyDelayMs + 2000);
        await worker.stop();
        await assertSentOnce(store, message.id, peer);
      } finally {
        await messenger.close();
        await peer.close();
        await store.close();
        await database.drop();
      }
    });
  }
});

describe('a record slower than the lease', () => {
  test('a message whose record takes longer than its lease is not sent again by this process meanwhile', async () => {
    const database = await freshDatabase();
    const store = await openDatabase(database.url);
    // The first write after the server took the message, the attempt's record, waits 1.5 s
    // first (as on a slow or partitioned link to PostgreSQL), so the 0.9 s lease runs out
    // before it is written; the worker's claims meanwhile are not slowed.
    let slowNext = false;
    const slow: Db = {
      db: store.db,
      dialect: store.dialect,
      ping: () => store.ping(),
      close: () => store.close(),
      write: async (unit) => {
        if (slowNext) {
          slowNext = false;
          await sleep(1500);
        }
        return store.write(unit);
      },
    };
    const peer = await startSmtpPeer();
    const transport = new SmtpTransport(peer.url, { timeoutMs: 10_000 });
    const messenger = leasedMessenger(slow, transport);
    peer.onReceived = () => {
      slowNext = true;
    };
    try {
      const message = await store.write((tx) => messenger.enqueue(tx, emailTo('slow-record@duka.example'), Date.now(), false));
      const worker = runWorker(messenger);
      await atServer(peer);
      // The record written, then two more leases' worth of claims.
      await sleep(3000);
      await worker.stop();
      await assertSentOnce(store, message.id, peer);
    } finally {
      await messenger.close();
      await peer.close();
      await store.close();
      await database.drop();
    }
  });
});
