import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { signRequest } from '../src/client/index.js';
import { call, type MerchantSetup, merchantWithPos, paymentBody } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';
import { checkedFetch } from './helpers/openapi-check.js';

/**
 * The database failing under requests: the service answers a precise 503 with Retry-After,
 * never exits, and carries on by itself once the database is back. SQLite runs out of room
 * (max_page_count, the way a full disk looks to it); PostgreSQL has every connection of the
 * service killed, over and over, while payments are created (as a restart or failover does).
 */

describe('the database failing under requests', () => {
  let lipa: Lipa;
  let merchant: MerchantSetup;

  before(async () => {
    lipa = await startLipa({ RATE_LIMIT_KEY_PER_SEC: '100000' });
    merchant = await merchantWithPos(lipa);
  });
  after(async () => {
    await lipa.close();
  });

  /** A signed creation, with the answer's Retry-After. */
  const create = async () => {
    const body = JSON.stringify(paymentBody(merchant));
    const url = `${lipa.url}/api/public/v1/merchant-payments`;
    const headers = signRequest({ keyId: merchant.keyId, secret: merchant.secret, method: 'POST', url, body });
    const response = await checkedFetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
    return { status: response.status, body: (await response.json()) as unknown, retryAfter: response.headers.get('retry-after') };
  };

  test('writes answer 503 database_unavailable with Retry-After while it fails, every acknowledged one is kept, and work resumes after', async () => {
    const created: string[] = [];
    const unavailable: { status: number; body: unknown; retryAfter: string | null }[] = [];
    const record = (reply: { status: number; body: unknown; retryAfter: string | null }) => {
      if (reply.status === 201) created.push((reply.body as { paymentIdentifier: string }).paymentIdentifier);
      else unavailable.push(reply);
    };

    if (lipa.ctx.store.dialect === 'sqlite') {
      const apiKey = (await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: merchant.token, body: {} })).body.apiKey;
      // No room for one more page: every write fails as on a full disk.
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(lipa.ctx.store.db);
      await sql.raw(`pragma max_page_count = ${rows[0]?.page_count}`).execute(lipa.ctx.store.db);
      try {
        for (let i = 0; i < 20; i++) record(await create());
        // The messaging API has no 503: its 500, with the same hint when to retry (once the
        // pages with room left are full too).
        let sms: Awaited<ReturnType<typeof call>> | undefined;
        for (let i = 0; i < 100 && sms?.status !== 500; i++) {
          sms = await call(lipa.url, 'POST', '/api/messages', {
            headers: { api_key: apiKey },
            body: { message: { type: 'sms', phone: { country_code: '254', number: '712345678' }, content: 'Disk full' } },
          });
          assert.ok(sms.status === 201 || sms.status === 500, sms.text);
        }
        assert.equal(sms?.status, 500);
        assert.equal(sms?.body.error_code, 'internal_server_error');
        assert.equal(sms?.headers.get('retry-after'), '5');
      } finally {
        await sql`pragma max_page_count = 4294967294`.execute(lipa.ctx.store.db);
      }
    } else {
      // Kill the service's connections every 20 ms while 8 clients create payments for 3 s.
      const pg = (await import('pg')).default;
      const killer = new pg.Client({ connectionString: lipa.databaseUrl });
      await killer.connect();
      let killing = true;
      let kills = 0;
      const until = Date.now() + 3000;
      let pause = 100;
      const killing$ = (async () => {
        while (killing) {
          const result = await killer.query(
            'select pg_terminate_backend(pid) as killed from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
          );
          kills += result.rows.filter((r) => r.killed).length;
          // Every 20 ms for 3 s; then, if none has been acknowledged yet, ever less often (from
          // 100 ms, doubling up to 1.6 s) until some are (at most 10 s more): the check below
          // needs some to check, and on a loaded machine a payment takes more than 100 ms.
          let wait = 20;
          if (Date.now() >= until) {
            wait = pause;
            pause = Math.min(pause * 2, 1600);
          }
          await new Promise((r) => setTimeout(r, wait));
        }
      })();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (Date.now() < until || (created.length === 0 && Date.now() < until + 10_000)) record(await create());
        }),
      );
      killing = false;
      await killing$;
      await killer.end();
      assert.ok(kills > 10, `${kills} connections killed`);
      assert.ok(created.length > 0, 'some payments were acknowledged, so that their being stored is checked below');
      // Each loss is a line of the service's JSON log, not a bare process warning.
      assert.ok(lipa.logs.some((line) => /"level":40.*PostgreSQL (idle )?connection lost/.test(line)));
    }

    assert.ok(unavailable.length > 0, 'some writes failed');
    for (const reply of unavailable) {
      assert.equal(reply.status, 503, JSON.stringify(reply));
      assert.deepEqual(
        (reply.body as { error: unknown }).error,
        { code: 'database_unavailable', message: 'The database is unavailable; retry in a few seconds.' },
        JSON.stringify(reply),
      );
      assert.equal(reply.retryAfter, '5');
    }
    // Every payment the service acknowledged is there, once.
    const stored = await lipa.ctx.store.db.selectFrom('payments').select('id').where('merchant_id', '=', merchant.merchantId).execute();
    for (const id of created)
      assert.ok(
        stored.some((row) => row.id === id),
        `${id} was acknowledged but is not stored`,
      );
    // And the service carries on by itself (on PostgreSQL the pool opens new connections).
    let after: Awaited<ReturnType<typeof create>> | undefined;
    for (let i = 0; i < 20 && after?.status !== 201; i++) {
      after = await create();
      if (after.status !== 201) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(after?.status, 201, JSON.stringify(after?.body));
    const ready = await call(lipa.url, 'GET', '/ready');
    assert.equal(ready.status, 200);
  });
});

describe('a SQLite write-ahead log deleted from under the service (an operator mistake)', () => {
  test('/ready says so (503) and what to do, and a clean stop still writes everything back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lipa-wal-'));
    const url = `file:${join(dir, 'lipa.sqlite')}`;
    try {
      let lipa = await startLipa({ DATABASE_URL: url });
      try {
        assert.equal((await call(lipa.url, 'GET', '/ready')).status, 200);
        rmSync(join(dir, 'lipa.sqlite-wal'));
        const ready = await call(lipa.url, 'GET', '/ready');
        assert.equal(ready.status, 503);
        assert.equal(ready.body.error.code, 'not_ready');
        assert.match(ready.body.error.message, /write-ahead log \(lipa\.sqlite-wal\) was deleted .* stop it with SIGTERM/);
        // Writes still work meanwhile; the advice holds: a clean stop keeps them.
        await merchantWithPos(lipa);
      } finally {
        await lipa.close();
      }
      lipa = await startLipa({ DATABASE_URL: url });
      try {
        const merchants = await lipa.ctx.store.db.selectFrom('merchants').select('id').execute();
        assert.equal(merchants.length, 1);
        assert.equal((await call(lipa.url, 'GET', '/ready')).status, 200, 'a new log once restarted');
      } finally {
        await lipa.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
