import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Db, openDatabase } from '../src/db/database.js';
import { hotQuery } from '../src/db/hot-query.js';
import { freshDatabase, ON_POSTGRES, type TestDatabase } from './helpers/harness.js';

/** The write path every store uses (db.write), on the database under test. */
describe('db.write: atomic units, grouped on SQLite', () => {
  let database: TestDatabase;
  let store: Db;
  before(async () => {
    database = await freshDatabase();
    store = await openDatabase(database.url);
  });
  after(async () => {
    await store.close();
    await database.drop();
  });

  const insertCategory = (id: string) => store.write((tx) => tx.insertInto('categories').values({ id, name: id, mcc: id }).execute());

  test('200 concurrent units all commit and all resolve', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `gc-${i}`);
    await Promise.all(ids.map(insertCategory));
    const rows = await store.db.selectFrom('categories').select('id').where('id', 'like', 'gc-%').execute();
    assert.equal(rows.length, 200);
  });

  test('a failing unit rolls back alone; its neighbours in the same batch commit', async () => {
    const results = await Promise.allSettled([
      insertCategory('ok-1'),
      store.write(async (tx) => {
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
    const ids = (await store.db.selectFrom('categories').select('id').where('id', 'in', ['ok-1', 'ok-2', 'doomed']).execute()).map(
      (r) => r.id,
    );
    assert.deepEqual(ids.sort(), ['ok-1', 'ok-2']);
  });

  test('a read outside the unit never sees its uncommitted writes', async () => {
    // On SQLite hot queries run straight on the connection when no transaction is open;
    // during a batch they must wait, or they would read what is about to be rolled back.
    let read: Promise<{ rows: unknown[] }> | undefined;
    const write = store.write(async (tx) => {
      await tx.insertInto('categories').values({ id: 'dirty', name: 'dirty', mcc: 'dirty' }).execute();
      read = hotQuery(store.db, 'test.dirty-read', ['dirty'], () =>
        store.db.selectFrom('categories').select('id').where('id', '=', 'dirty'),
      );
      throw new Error('rolled back');
    });
    await assert.rejects(write, /rolled back/);
    assert.ok(read);
    assert.deepEqual((await read).rows, []);
  });

  test('a unit sees its own writes and returns its value', async () => {
    const value = await store.write(async (tx) => {
      await tx.insertInto('categories').values({ id: 'own', name: 'own', mcc: 'own' }).execute();
      const row = await tx.selectFrom('categories').select('name').where('id', '=', 'own').executeTakeFirstOrThrow();
      return row.name;
    });
    assert.equal(value, 'own');
  });

  test('migrations are idempotent: opening the same database again changes nothing', async () => {
    const again = await openDatabase(database.url);
    const count = await again.db
      .selectFrom('categories')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.ok(Number(count.n) >= 20);
    await again.close();
  });

  test('close waits for units under way: all of them are committed', async () => {
    const other = await openDatabase(database.url);
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
    const rows = await store.db.selectFrom('categories').select('id').where('id', 'like', 'close-%').execute();
    assert.equal(rows.length, 100);
  });
});
