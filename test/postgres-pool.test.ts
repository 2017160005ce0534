import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { call, clientFor, merchantWithPos } from './helpers/client.js';
import { ON_POSTGRES, startLipa } from './helpers/harness.js';

// PostgreSQL only: there every request borrows one of DATABASE_POOL_SIZE connections, and a
// lock held elsewhere can hold all of them up. (SQLite answers `select 1` on the event loop.)
if (ON_POSTGRES) {
  describe('PostgreSQL: every pool connection held up behind a lock', () => {
    test('/ready says 503 within about 2 s instead of waiting; the held-up requests finish once the lock goes', async () => {
      const lipa = await startLipa({ DATABASE_POOL_SIZE: '2' });
      const locker = new pg.Client({ connectionString: lipa.databaseUrl });
      try {
        const merchant = await merchantWithPos(lipa);
        const client = clientFor(lipa.url, merchant);
        await locker.connect();
        await locker.query('begin');
        await locker.query('lock table nonces in access exclusive mode');
        // Each signed request reads the nonces: three of them hold both connections and queue.
        const held = [1, 2, 3].map(() => client.paymentStatus('pay_nothing_here'));
        await new Promise((r) => setTimeout(r, 300));

        const started = Date.now();
        const ready = await call(lipa.url, 'GET', '/ready');
        const waited = Date.now() - started;
        assert.equal(ready.status, 503, ready.text);
        assert.equal(ready.body.error.code, 'not_ready');
        assert.ok(waited >= 1900 && waited < 5000, `answered after ${waited} ms`);

        await locker.query('commit');
        for (const reply of await Promise.all(held)) assert.equal(reply.status, 404, JSON.stringify(reply.body));
        assert.equal((await call(lipa.url, 'GET', '/ready')).status, 200);
      } finally {
        await locker.end().catch(() => undefined);
        await lipa.close();
      }
    });
  });
}
