import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { purgeExpired } from '../src/jobs/housekeeping.js';
import { type Lipa, startLipa } from './helpers/harness.js';

describe('housekeeping', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  test('expired nonces and receipts kept an hour for no submission are purged; the rest stay', async () => {
    const now = Date.now();
    const { db } = lipa.ctx.store;
    await lipa.ctx.store.write(async (tx) => {
      await tx
        .insertInto('nonces')
        .values([
          { key_id: 'key_housekeeping', nonce: 'expired-nonce-1', expires_at: now - 1 },
          { key_id: 'key_housekeeping', nonce: 'live-nonce-0001', expires_at: now + 60_000 },
        ])
        .execute();
      await tx
        .insertInto('early_receipts')
        .values([
          { provider_id: 'smsc-old', delivered: 1, detail: 'DELIVRD', received_at: now - 61 * 60_000 },
          { provider_id: 'smsc-new', delivered: 1, detail: 'DELIVRD', received_at: now - 60_000 },
        ])
        .execute();
    });
    await purgeExpired(lipa.ctx);
    const nonces = await db.selectFrom('nonces').select('nonce').where('key_id', '=', 'key_housekeeping').execute();
    assert.deepEqual(
      nonces.map((n) => n.nonce),
      ['live-nonce-0001'],
    );
    const receipts = await db.selectFrom('early_receipts').select('provider_id').execute();
    assert.deepEqual(
      receipts.map((r) => r.provider_id),
      ['smsc-new'],
    );
  });
});
