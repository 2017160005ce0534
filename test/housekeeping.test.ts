import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../src/db/database.js';
import { PURGE_BATCH, purgeExpired } from '../src/jobs/housekeeping.js';
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

  test('a large purge goes PURGE_BATCH rows a unit, so that no one unit holds the database for long', async () => {
    const now = Date.now();
    const expired = 2 * PURGE_BATCH + 5;
    await lipa.ctx.store.write(async (tx) => {
      for (let i = 0; i < expired; i += 500) {
        const rows = Array.from({ length: Math.min(500, expired - i) }, (_, j) => ({
          key_id: 'key_bulk',
          nonce: `expired-${String(i + j).padStart(12, '0')}`,
          expires_at: now - 1 - j,
        }));
        await tx.insertInto('nonces').values(rows).execute();
      }
      await tx
        .insertInto('nonces')
        .values({ key_id: 'key_bulk', nonce: 'live-nonce-0002', expires_at: now + 60_000 })
        .execute();
    });
    // Count the units, and the rows each one leaves, through the store the purge is given.
    const { store } = lipa.ctx;
    let units = 0;
    const counted = countingUnits(store, () => {
      units += 1;
    });
    assert.equal(await purgeExpired({ ...lipa.ctx, store: counted }), expired);
    const left = await store.db.selectFrom('nonces').select('nonce').where('key_id', '=', 'key_bulk').execute();
    assert.deepEqual(
      left.map((n) => n.nonce),
      ['live-nonce-0002'],
    );
    // Three units of nonces (2,000 + 2,000 + 5), one for each of the four other tables.
    assert.equal(units, 3 + 4);
  });

  test('a purge told the service is stopping ends after the unit under way; the next one purges the rest', async () => {
    const now = Date.now();
    await lipa.ctx.store.write(async (tx) => {
      for (let i = 0; i < PURGE_BATCH + 5; i += 500) {
        const rows = Array.from({ length: Math.min(500, PURGE_BATCH + 5 - i) }, (_, j) => ({
          key_id: 'key_stopping',
          nonce: `expired-${String(i + j).padStart(12, '0')}`,
          expires_at: now - 1,
        }));
        await tx.insertInto('nonces').values(rows).execute();
      }
    });
    // The stop comes while the first unit of nonces runs (after one unit for each of the three tables before them).
    const { store } = lipa.ctx;
    const stopping = new AbortController();
    let units = 0;
    const stopsAt4th = countingUnits(store, () => {
      units += 1;
      if (units === 4) stopping.abort();
    });
    assert.equal(await purgeExpired({ ...lipa.ctx, store: stopsAt4th }, stopping.signal), PURGE_BATCH);
    assert.equal(units, 4, 'no unit after the stop, on this table or the next');
    assert.equal(await purgeExpired(lipa.ctx), 5);
    const left = await lipa.ctx.store.db.selectFrom('nonces').select('nonce').where('key_id', '=', 'key_stopping').execute();
    assert.deepEqual(left, []);
  });
});

/** The store, calling `beforeUnit` as each unit is written. */
function countingUnits(store: Db, beforeUnit: () => void): Db {
  return {
    ...store,
    write: (unit) => {
      beforeUnit();
      return store.write(unit);
    },
  };
}
