import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../src/db/database.js';
import { createLogger } from '../src/logger.js';
import { Messenger } from '../src/messaging/messenger.js';
import { SmtpTransport } from '../src/messaging/transports/smtp.js';
import { freshDatabase } from './helpers/harness.js';
import { startSmtpPeer } from './helpers/smtp-peer.js';

describe('a message on the wire keeps its lease', () => {
  test('a mail server slower than the lease gets the message once, under one Message-ID, recorded once, among failing units', async () => {
    const database = await freshDatabase();
    const store = await openDatabase(database.url);
    // The server answers each message 2.5 s after it arrives; a lease lasts 0.9 s.
    const peer = await startSmtpPeer({ replyDelayMs: 2500 });
    const transport = new SmtpTransport(peer.url, { timeoutMs: 10_000 });
    const messenger = new Messenger(store, createLogger('silent'), { email: transport, sms: null }, Date.now, () => 86_400_000, 900);
    try {
      const message = await store.write((tx) =>
        messenger.enqueue(
          tx,
          {
            merchant_id: null,
            messaging_key_id: null,
            purpose: 'api',
            type: 'email',
            email: 'slow@duka.example',
            subject: 'Slow server',
            content_type: 'text',
            phone_country_code: null,
            phone_number: null,
            content: 'Once only',
            segments: null,
          },
          Date.now(),
          false,
        ),
      );
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
