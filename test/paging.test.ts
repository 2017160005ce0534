import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Payment } from '../src/client/index.js';
import type { PaymentStatus } from '../src/db/schema.js';
import { assertError } from './helpers/assertions.js';
import {
  admin,
  call,
  categoryId,
  clientFor,
  createPayer,
  type MerchantSetup,
  merchantWithPos,
  type PayerFixture,
  payerToken,
  paymentBody,
  posBody,
  type Reply,
} from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';

/**
 * Every list of the API pages one way (CONTRACT §12): `limit` 1-500 (default 100), `cursor`,
 * `{data, nextCursor}`. Rows are copied into the database directly, enough of them for more
 * than one default page; their times repeat in pairs, so the id must order rows of one instant.
 */

const ROWS = 105;
/** Where the copied rows' times start, older than anything the test makes over HTTP. */
const BASE = Date.now() - 86_400_000;
/** The i-th copy's created_at: newest first, two rows of each millisecond. */
const timeOf = (i: number) => BASE - Math.floor(i / 2);
const suffix = (i: number) => `paging${String(i).padStart(4, '0')}`;
const NO_LIMITS = { RATE_LIMIT_KEY_PER_SEC: '100000', RATE_LIMIT_AUTH_IP_PER_MIN: '100000' };

interface Row {
  id: string;
  created_at: number;
}

/** The ids of `rows` in the order of the lists: (created_at, id), newest first, or oldest first. */
function ordered(rows: Row[], direction: 'desc' | 'asc' = 'desc'): string[] {
  const sign = direction === 'desc' ? -1 : 1;
  return [...rows].sort((a, b) => sign * (a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))).map((r) => r.id);
}

interface ListCase {
  name: string;
  /** The list's path and query, without limit or cursor. */
  path: string;
  get: (pathAndQuery: string) => Promise<Reply>;
  /** The id of an answer's item. */
  idOf: (item: Record<string, unknown>) => string;
  /** The ids the whole list holds, in its order. */
  expected: () => Promise<string[]>;
  /** The scope of the same list of another owner (or of another list): its cursors are refused here. */
  foreignScope: () => string;
}

describe('paging: every list of the API', () => {
  let lipa: Lipa;
  let a: MerchantSetup;
  let b: MerchantSetup;
  let payer: PayerFixture;
  let payerBearer: string;
  /** A's payment whose callback events are listed. */
  let withEvents: Payment;

  /** Copies `template` of `table` ROWS times with fresh ids, times and what `vary` changes. */
  async function copies(
    table: 'payments' | 'messages' | 'merchants' | 'payers' | 'callback_events',
    template: object,
    vary: (i: number) => object,
  ) {
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      ...template,
      id: `${String((template as Row).id).split('_')[0]}_${suffix(i)}`,
      created_at: timeOf(i),
      ...vary(i),
    }));
    // One insert for the copies of any of these tables: typed by the template copied.
    await lipa.ctx.store.db
      .insertInto(table)
      .values(rows as never)
      .execute();
  }

  const one = async (table: 'payments' | 'messages' | 'merchants' | 'payers' | 'callback_events', id: string) =>
    lipa.ctx.store.db.selectFrom(table).selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  async function all(
    table: 'payments' | 'messages' | 'merchants' | 'payers',
    where?: { column: 'merchant_id' | 'payer_id'; value: string },
  ) {
    let query = lipa.ctx.store.db.selectFrom(table).select(['id', 'created_at']);
    if (where) query = query.where(where.column, '=', where.value);
    return query.execute();
  }

  before(async () => {
    lipa = await startLipa(NO_LIMITS);
    a = await merchantWithPos(lipa);
    b = await merchantWithPos(lipa);
    payer = await createPayer(lipa, { balance: 100 });
    payerBearer = await payerToken(lipa, payer);
    const client = clientFor(lipa.url, a);
    const created = await client.createPayment(paymentBody(a, { payer: { method: 'phone', value: payer.phone } }) as never);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    withEvents = created.body as Payment;
    const theirs = await clientFor(lipa.url, b).createPayment(paymentBody(b) as never);
    assert.equal(theirs.status, 201);

    // A's payments, alternately pending and paid, to the payer (the wallet lists them too).
    const payment = await one('payments', withEvents.paymentIdentifier);
    const statuses: PaymentStatus[] = ['pending', 'paid'];
    await copies('payments', payment, (i) => ({ order_id: suffix(i), status: statuses[i % 2], fingerprint: suffix(i) }));
    // A's messages: one sent through the messaging API, copied.
    const key = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: a.token, body: {} });
    const sent = await call(lipa.url, 'POST', '/api/messages', {
      headers: { api_key: key.body.apiKey },
      body: { message: { type: 'sms', phone: { country_code: '254', number: '712345678' }, content: 'Karibu' } },
    });
    assert.ok(sent.status === 200 || sent.status === 201, sent.text);
    await copies('messages', await one('messages', sent.body.id ?? sent.body.data.id), () => ({}));
    await copies('merchants', await one('merchants', a.merchantId), (i) => ({ login: `${suffix(i)}@duka.example` }));
    await copies('payers', await one('payers', payer.payerId), (i) => ({ phone: `2547${String(i).padStart(8, '0')}` }));
    // Events come with changes of status; these stand for them (their deliveries are not listed).
    const event = {
      id: 'evt_paging',
      payment_id: payment.id,
      merchant_id: payment.merchant_id,
      api_key_id: payment.api_key_id,
      pos_id: payment.pos_id,
      payload: JSON.stringify({ eventType: 'payment.status_changed', payment: { paymentIdentifier: payment.id } }),
      created_at: BASE,
    };
    await lipa.ctx.store.db
      .insertInto('callback_events')
      .values(event as never)
      .execute();
    // Callback events are listed oldest first: the copies come after the real one.
    await copies('callback_events', event, (i) => ({ created_at: event.created_at + 1 + Math.floor(i / 2) }));
  });
  after(() => lipa.close());

  const merchantGet = (token: () => string) => (path: string) => call(lipa.url, 'GET', path, { token: token() });
  const adminGet = (path: string) => admin(lipa, 'GET', path);
  const firstCursor = async (get: (path: string) => Promise<Reply>, path: string) => {
    const reply = await get(`${path}${path.includes('?') ? '&' : '?'}limit=1`);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(typeof reply.body.nextCursor, 'string', `${path} has a second page`);
    return reply.body.nextCursor as string;
  };

  const cases: ListCase[] = [
    {
      name: 'GET /api/v1/payments',
      path: '/api/v1/payments',
      get: merchantGet(() => a.token),
      idOf: (p) => String(p.paymentIdentifier),
      expected: async () => ordered(await all('payments', { column: 'merchant_id', value: a.merchantId })),
      foreignScope: () => `payments:${b.merchantId}`,
    },
    {
      name: 'GET /api/v1/messages',
      path: '/api/v1/messages',
      get: merchantGet(() => a.token),
      idOf: (m) => String(m.id),
      expected: async () => ordered(await all('messages', { column: 'merchant_id', value: a.merchantId })),
      foreignScope: () => `messages:${b.merchantId}`,
    },
    {
      name: 'GET /api/v1/callbacks',
      path: '',
      get: merchantGet(() => a.token),
      idOf: (e) => String(e.eventId),
      expected: async () =>
        ordered(
          await lipa.ctx.store.db
            .selectFrom('callback_events')
            .select(['id', 'created_at'])
            .where('payment_id', '=', withEvents.paymentIdentifier)
            .execute(),
          'asc',
        ),
      foreignScope: () => `callbacks:${b.merchantId}:${withEvents.paymentIdentifier}`,
    },
    {
      name: 'GET /api/v1/wallet/payments',
      path: '/api/v1/wallet/payments',
      get: merchantGet(() => payerBearer),
      idOf: (p) => String(p.paymentIdentifier),
      expected: async () => ordered(await all('payments', { column: 'payer_id', value: payer.payerId })),
      foreignScope: () => `wallet:${a.merchantId}`,
    },
    {
      name: 'GET /api/v1/admin/merchants',
      path: '/api/v1/admin/merchants',
      get: adminGet,
      idOf: (m) => String(m.merchantId),
      expected: async () => ordered(await all('merchants')),
      foreignScope: () => 'admin:payers',
    },
    {
      name: 'GET /api/v1/admin/payers',
      path: '/api/v1/admin/payers',
      get: adminGet,
      idOf: (p) => String(p.payerId),
      expected: async () => ordered(await all('payers')),
      foreignScope: () => 'admin:merchants',
    },
    {
      name: 'GET /api/v1/admin/outbox',
      path: '/api/v1/admin/outbox',
      get: adminGet,
      idOf: (m) => String(m.id),
      expected: async () => ordered(await all('messages')),
      foreignScope: () => 'admin:payers',
    },
  ];

  /** `path` with more query parameters. */
  const withQuery = (c: ListCase, query: string) => {
    const path = c.path === '' ? `/api/v1/callbacks?paymentIdentifier=${withEvents.paymentIdentifier}` : c.path;
    return query === '' ? path : `${path}${path.includes('?') ? '&' : '?'}${query}`;
  };

  /** Every page of `c` with `limit`, as the ids of each page. */
  async function walk(c: ListCase, limit: number, query = ''): Promise<string[][]> {
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const paging: string = `limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const reply = await c.get(withQuery(c, query === '' ? paging : `${query}&${paging}`));
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(Object.keys(reply.body).sort(), ['data', 'nextCursor']);
      pages.push(reply.body.data.map(c.idOf));
      cursor = reply.body.nextCursor;
      assert.ok(pages.length < 1000, 'the walk ends');
    } while (cursor !== null);
    return pages;
  }

  for (const c of cases) {
    describe(c.name, () => {
      test('without a limit, a page of 100 and a cursor to the rest', async () => {
        const reply = await c.get(withQuery(c, ''));
        assert.equal(reply.status, 200, reply.text);
        const expected = await c.expected();
        assert.ok(expected.length > 100, `${expected.length} rows`);
        assert.deepEqual(reply.body.data.map(c.idOf), expected.slice(0, 100));
        assert.equal(typeof reply.body.nextCursor, 'string');
      });

      test('a walk with a small limit returns every row once, in order; the last page has nextCursor null', async () => {
        const pages = await walk(c, 7);
        const expected = await c.expected();
        assert.deepEqual(pages.flat(), expected);
        assert.equal(pages.length, Math.ceil(expected.length / 7));
        for (const page of pages.slice(0, -1)) assert.equal(page.length, 7);
        // The whole list in one page: no next page.
        const whole = await c.get(withQuery(c, 'limit=500'));
        assert.deepEqual(whole.body.data.map(c.idOf), expected);
        assert.equal(whole.body.nextCursor, null);
      });

      test('limit outside 1-500 or not a number: 422 naming limit', async () => {
        for (const bad of ['0', '501', 'ten', '-1', '1.5', ''])
          assertError(await c.get(withQuery(c, `limit=${bad}`)), 422, 'validation_failed', 'limit');
        for (const good of ['1', '500']) assert.equal((await c.get(withQuery(c, `limit=${good}`))).status, 200);
      });

      test("an edited cursor, a made-up one, or another owner's or list's: 422 naming cursor", async () => {
        const cursor = await firstCursor(c.get, withQuery(c, ''));
        const [body, tag] = cursor.split('.') as [string, string];
        const edited = Buffer.from(JSON.stringify([Date.now(), 'zzz'])).toString('base64url');
        for (const bad of [
          `${edited}.${tag}`,
          `${body}.${tag.slice(0, -1)}${tag.endsWith('A') ? 'B' : 'A'}`, // its last character changed
          `${body}x.${tag}`,
          'made-up',
          `${cursor}.x`,
          lipa.ctx.cursors.encode(c.foreignScope(), [BASE, 'pay_x']),
        ])
          assertError(await c.get(withQuery(c, `cursor=${encodeURIComponent(bad)}`)), 422, 'validation_failed', 'cursor');
      });
    });
  }

  test('filters page too: payments and the wallet by status, payments by orderId', async () => {
    const payments = cases[0] as ListCase;
    const wallet = cases[3] as ListCase;
    const rows = await lipa.ctx.store.db
      .selectFrom('payments')
      .select(['id', 'created_at', 'status'])
      .where('merchant_id', '=', a.merchantId)
      .execute();
    for (const status of ['pending', 'paid'] as const) {
      const expected = ordered(rows.filter((r) => r.status === status));
      assert.ok(expected.length > 50);
      assert.deepEqual((await walk(payments, 9, `status=${status}`)).flat(), expected, status);
      assert.deepEqual((await walk(wallet, 9, `status=${status}`)).flat(), expected, `wallet ${status}`);
    }
    // The same order id at two terminals: one page each.
    const second = await call(lipa.url, 'POST', '/api/v1/points-of-sale', {
      token: a.token,
      body: posBody(a.merchantId, await categoryId(lipa)),
    });
    assert.equal(second.status, 201, second.text);
    const again = await clientFor(lipa.url, a).createPayment(
      paymentBody({ terminalId: second.body.terminalId }, { orderId: withEvents.orderId }) as never,
    );
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.deepEqual(await walk(payments, 1, `orderId=${withEvents.orderId}`), [
      [(again.body as Payment).paymentIdentifier],
      [withEvents.paymentIdentifier],
    ]);
    assert.deepEqual(await walk(payments, 1, `orderId=${withEvents.orderId}&status=pending`), [
      [(again.body as Payment).paymentIdentifier],
      [withEvents.paymentIdentifier],
    ]);
  });

  test("another merchant's cursor of the same list is refused; a cursor of one payment's callbacks is refused for another's", async () => {
    assert.equal((await clientFor(lipa.url, b).createPayment(paymentBody(b) as never)).status, 201);
    const theirs = await firstCursor(
      merchantGet(() => b.token),
      '/api/v1/payments',
    );
    assertError(
      await call(lipa.url, 'GET', `/api/v1/payments?cursor=${encodeURIComponent(theirs)}`, { token: a.token }),
      422,
      'validation_failed',
      'cursor',
    );
    const mine = await firstCursor(
      merchantGet(() => a.token),
      `/api/v1/callbacks?paymentIdentifier=${withEvents.paymentIdentifier}`,
    );
    const other = (await all('payments', { column: 'merchant_id', value: a.merchantId })).find(
      (p) => p.id !== withEvents.paymentIdentifier,
    );
    assertError(
      await call(lipa.url, 'GET', `/api/v1/callbacks?paymentIdentifier=${other?.id}&cursor=${encodeURIComponent(mine)}`, {
        token: a.token,
      }),
      422,
      'validation_failed',
      'cursor',
    );
  });

  test('a walk over 1,000 payments while another client keeps creating more returns each of them once', async () => {
    const c = await merchantWithPos(lipa);
    const client = clientFor(lipa.url, c);
    const created = await client.createPayment(paymentBody(c) as never);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const template = await lipa.ctx.store.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', (created.body as Payment).paymentIdentifier)
      .executeTakeFirstOrThrow();
    const originals = Array.from({ length: 1000 }, (_, i) => ({
      ...template,
      id: `pay_walk${String(i).padStart(5, '0')}`,
      order_id: `walk-${i}`,
      fingerprint: `walk-${i}`,
      created_at: timeOf(i),
    }));
    for (let i = 0; i < originals.length; i += 100)
      await lipa.ctx.store.db
        .insertInto('payments')
        .values(originals.slice(i, i + 100))
        .execute();
    const expected = ordered([...originals, template]);

    let walking = true;
    let made = 0;
    const writer = (async () => {
      while (walking) {
        const reply = await client.createPayment(paymentBody(c) as never);
        assert.equal(reply.status, 201, JSON.stringify(reply.body));
        made++;
      }
    })();
    const seen: string[] = [];
    let cursor: string | null = null;
    try {
      do {
        const query: string = cursor === null ? 'limit=37' : `limit=37&cursor=${encodeURIComponent(cursor)}`;
        const reply = await call(lipa.url, 'GET', `/api/v1/payments?${query}`, { token: c.token });
        assert.equal(reply.status, 200, reply.text);
        seen.push(...reply.body.data.map((p: Payment) => p.paymentIdentifier));
        cursor = reply.body.nextCursor;
        // Give the writer its turn between pages, as a client that reads and shows each page would.
        await new Promise((resolve) => setTimeout(resolve, 5));
      } while (cursor !== null);
    } finally {
      walking = false;
      await writer;
    }
    assert.ok(made > 0, 'payments were created during the walk');
    assert.equal(new Set(seen).size, seen.length, 'no payment twice');
    const known = new Set(expected);
    assert.deepEqual(
      seen.filter((id) => known.has(id)),
      expected,
      'every original payment once, in order',
    );
  });
});
