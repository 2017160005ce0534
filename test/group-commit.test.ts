import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { isDatabaseUnavailable, onCommit, openDatabase } from '../src/db/database.js';
import { hotQuery } from '../src/db/hot-query.js';
import { freshDatabase, ON_POSTGRES, storeForSuite } from './helpers/harness.js';

/** The write path every store uses (db.write), on the database under test. */
describe('db.write: atomic units, grouped on SQLite', () => {
  const suite = storeForSuite();

  const insertCategory = (id: string) => suite.store.write((tx) => tx.insertInto('categories').values({ id, name: id, mcc: id }).execute());

  test('200 concurrent units all commit and all resolve', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `gc-${i}`);
    await Promise.all(ids.map(insertCategory));
    const rows = await suite.store.db.selectFrom('categories').select('id').where('id', 'like', 'gc-%').execute();
    assert.equal(rows.length, 200);
  });

  test('a failing unit rolls back alone; its neighbours in the same batch commit', async () => {
    const results = await Promise.allSettled([
      insertCategory('ok-1'),
      suite.store.write(async (tx) => {
        await tx.insertInto('categories').values({ id: 'doomed', name: 'doomed', mcc: 'doomed' }).execute();
        throw new Error('business rule says no');
      }),
      insertCategory('ok-1'), // duplicate primary key: fails alone
      insertCategory('ok-2'),
    ]);
    // On SQLite the batch runs in order; on PostgreSQL either insert of 'ok-1' may be first.
    const [first, doomed, second, other] = results.map((r) => r.status);
    assert.equal(doomed, 'rejected');
    assert.deepEqual([first, second].sort(), ['fulfilled', 'rejected']);
    assert.equal(other, 'fulfilled');
    if (!ON_POSTGRES) assert.equal(first, 'fulfilled');
    const ids = (await suite.store.db.selectFrom('categories').select('id').where('id', 'in', ['ok-1', 'ok-2', 'doomed']).execute()).map(
      (r) => r.id,
    );
    assert.deepEqual(ids.sort(), ['ok-1', 'ok-2']);
  });

  test('onCommit: effects run once each unit has committed, once even when the batch runs again, never for a unit rolled back', async () => {
    const ran: string[] = [];
    const unit = (id: string, fail: boolean) =>
      suite.store.write(async (tx) => {
        onCommit(tx, () => ran.push(id));
        await tx.insertInto('categories').values({ id, name: id, mcc: id }).execute();
        // Not yet committed: the effect waits.
        assert.ok(!ran.includes(id));
        if (fail) throw new Error('no');
      });
    // On SQLite the failing unit makes the batch run again, each unit in its own savepoint.
    const results = await Promise.allSettled([unit('oc-1', false), unit('oc-2', true), unit('oc-3', false)]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.deepEqual(ran.sort(), ['oc-1', 'oc-3']);
    assert.throws(() => onCommit(suite.store.db, () => undefined), /outside a unit/);
  });

  // SQLite's group commit: a full disk makes SQLite roll back the whole batch's transaction.
  if (!ON_POSTGRES) {
    test('a full disk during a batch: every unit gets the database error (a 503), none a lost savepoint (a 500)', async () => {
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(suite.store.db);
      await sql.raw(`pragma max_page_count = ${rows[0]?.page_count}`).execute(suite.store.db);
      try {
        const results = await Promise.allSettled(
          Array.from({ length: 30 }, (_, i) =>
            suite.store.write((tx) =>
              tx
                .insertInto('categories')
                .values({ id: `full-${i}`, name: 'x'.repeat(3000), mcc: `full-${i}` })
                .execute(),
            ),
          ),
        );
        const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as { code?: string; message: string }] : []));
        assert.ok(errors.length > 0, 'the disk filled up');
        for (const error of errors) assert.ok(isDatabaseUnavailable(error), `${error.code}: ${error.message}`);
      } finally {
        await sql`pragma max_page_count = 4294967294`.execute(suite.store.db);
      }
      await insertCategory('after-full');
    });
  }

  test('a read outside the unit never sees its uncommitted writes', async () => {
    // On SQLite hot queries run straight on the connection when no transaction is open;
    // during a batch they must wait, or they would read what is about to be rolled back.
    let read: Promise<{ rows: unknown[] }> | undefined;
    const write = suite.store.write(async (tx) => {
      await tx.insertInto('categories').values({ id: 'dirty', name: 'dirty', mcc: 'dirty' }).execute();
      read = hotQuery(suite.store.db, 'test.dirty-read', ['dirty'], () =>
        suite.store.db.selectFrom('categories').select('id').where('id', '=', 'dirty'),
      );
      throw new Error('rolled back');
    });
    await assert.rejects(write, /rolled back/);
    assert.ok(read);
    assert.deepEqual((await read).rows, []);
  });

  test('a unit sees its own writes and returns its value', async () => {
    const value = await suite.store.write(async (tx) => {
      await tx.insertInto('categories').values({ id: 'own', name: 'own', mcc: 'own' }).execute();
      const row = await tx.selectFrom('categories').select('name').where('id', '=', 'own').executeTakeFirstOrThrow();
      return row.name;
    });
    assert.equal(value, 'own');
  });

  test('migrations are idempotent: opening the same database again changes nothing', async () => {
    const again = await openDatabase(suite.database.url);
    const count = await again.db
      .selectFrom('categories')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.ok(Number(count.n) >= 20);
    await again.close();
  });

  test('close waits for units under way: all of them are committed', async () => {
    const other = await openDatabase(suite.database.url);
    const pending = Array.from({ length: 100 }, (_, i) =>
      other.write((tx) =>
        tx
          .insertInto('categories')
          .values({ id: `close-${i}`, name: `close-${i}`, mcc: `close-${i}` })
          .execute(),
      ),
    );
    await other.close();
    await Promise.all(pending);
    const rows = await suite.store.db.selectFrom('categories').select('id').where('id', 'like', 'close-%').execute();
    assert.equal(rows.length, 100);
  });
});

describe('migrations: upgrading a database in use', () => {
  test('005 completes after a start cut short once its column was added (SQLite migrates outside a transaction)', async () => {
    const database = await freshDatabase();
    const old = await openDatabase(database.url, { upTo: '004_partial_message_indexes' });
    await sql`alter table messages add column failure_reason text`.execute(old.db);
    await old.close();
    const upgraded = await openDatabase(database.url);
    try {
      const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(upgraded.db);
      assert.ok(applied.rows.some((r) => r.name === '005_message_failure_reason'));
    } finally {
      await upgraded.close();
      await database.drop();
    }
  });

  test('005 gives messages that failed before it a reason their sender may read, naming no host', async () => {
    const database = await freshDatabase();
    const old = await openDatabase(database.url, { upTo: '004_partial_message_indexes' });
    const failed = (id: string, type: 'email' | 'sms', last_error: string) => ({
      id,
      merchant_id: null,
      messaging_key_id: null,
      purpose: 'api',
      type,
      email: type === 'email' ? 'a@example.com' : null,
      subject: type === 'email' ? 'Hi' : null,
      content_type: type === 'email' ? 'text' : null,
      phone_country_code: type === 'sms' ? '254' : null,
      phone_number: type === 'sms' ? '712345678' : null,
      content: 'Hello',
      segments: type === 'sms' ? 1 : null,
      status: 'failed' as const,
      created_at: 1,
      updated_at: 1,
      provider_id: null,
      attempts: 1,
      next_attempt_at: 1,
      locked_until: 0,
      last_error,
    });
    await old.write((tx) =>
      tx
        .insertInto('messages')
        .values([
          failed('m-smpp', 'sms', 'SMSC rejected submit_sm: ESME_RINVDSTADR (0x0B, invalid destination address)'),
          failed('m-receipt', 'sms', 'UNDELIV err:001'),
          failed('m-smtp', 'email', 'SMTP send via smtp.internal:25 failed (EENVELOPE 550): 550 5.1.1 <a@example.com>: no such user'),
          failed('m-gave-up', 'email', 'gave up after 9 tries in 300 s; the last: connect ECONNREFUSED 10.0.0.5:25'),
          failed('m-other', 'email', 'SMTP send via relay.internal failed: something odd'),
        ])
        .execute(),
    );
    await old.close();
    const upgraded = await openDatabase(database.url);
    try {
      const rows = await upgraded.db.selectFrom('messages').select(['id', 'failure_reason']).orderBy('id').execute();
      assert.deepEqual(Object.fromEntries(rows.map((r) => [r.id, r.failure_reason])), {
        'm-gave-up': 'Not sent: the mail server could not be reached or would not take it for as long as the message was worth sending.',
        'm-other': 'Refused by the mail server.',
        'm-receipt': 'The SMS centre reported it not delivered: UNDELIV err:001.',
        'm-smpp': 'Refused by the SMS centre: ESME_RINVDSTADR (0x0B, invalid destination address).',
        'm-smtp': 'Refused by the mail server: 550 5.1.1.',
      });
    } finally {
      await upgraded.close();
      await database.drop();
    }
  });
});
