import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import type { Balance, Page, Refund, Transaction } from '../src/client/index.js';
import { openDatabase } from '../src/db/database.js';
import { up } from '../src/db/migrations/012_refunds_and_statements.js';
import { accountId, checkLedger, postTransaction } from '../src/ledger/ledger.js';
import { assertError } from './helpers/assertions.js';
import { admin, call, clientFor, merchantWithPos, unique } from './helpers/client.js';
import { freshDatabase, type Lipa, startLipa } from './helpers/harness.js';
import { cents, ledgerBalance, NO_LIMITS, openTill, paidPayment, refundReference, type Till } from './helpers/money.js';
import { type Receiver, startReceiver } from './helpers/receiver.js';

/** The merchant's balance, statement and CSV export (CONTRACT §12). */

const iso = (ms: number) => new Date(ms).toISOString();

/** Every entry of a statement walk over the bearer route, page by page. */
async function walk(lipa: Lipa, token: string, query: string, limit: number) {
  const seen: Transaction[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const reply = await call(
      lipa.url,
      'GET',
      `/api/v1/transactions?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token },
    );
    assert.equal(reply.status, 200, reply.text);
    const page = reply.body as Page<Transaction>;
    assert.ok(page.data.length <= limit);
    seen.push(...page.data);
    cursor = page.nextCursor;
    pages++;
  } while (cursor !== null);
  return { seen, pages };
}

/** CSV rows as objects (the values here hold no quotes or commas). */
function parseCsv(text: string) {
  const [header, ...lines] = text.trimEnd().split('\r\n');
  const columns = (header as string).split(',');
  return lines.map((line) => Object.fromEntries(line.split(',').map((value, i) => [columns[i], value])));
}

/** The reconciliation of CONTRACT §12 for a run of entries, oldest first. */
function assertReconciles(oldestFirst: Transaction[]) {
  if (oldestFirst.length === 0) return;
  const first = oldestFirst[0] as Transaction;
  const opening = cents(first.balanceAfter) - cents(first.amount);
  let running = opening;
  for (const t of oldestFirst) {
    running += cents(t.amount);
    assert.equal(cents(t.balanceAfter), running, `balanceAfter of ${t.transactionId}`);
  }
}

describe('balance and transactions (CONTRACT §12)', () => {
  let lipa: Lipa;
  let receiver: Receiver;
  let till: Till;
  const refunds: Refund[] = [];

  before(async () => {
    lipa = await startLipa(NO_LIMITS);
    receiver = await startReceiver();
    till = await openTill(lipa, receiver);
    // Five payments and two refunds, in this order.
    for (const amount of [10, 20.5, 30, 40, 50]) await paidPayment(lipa, till, receiver, amount);
    const listed = await walk(lipa, till.merchant.token, '', 100);
    const [newest, , third] = listed.seen as [Transaction, Transaction, Transaction];
    for (const [payment, amount] of [
      [third.reference, 5],
      [newest.reference, 50],
    ] as const) {
      const reply = await till.client.refund({ paymentIdentifier: payment, refundReference: refundReference(), amount });
      assert.equal(reply.status, 201);
      refunds.push(reply.body as Refund);
    }
  });
  after(async () => {
    await lipa.close();
    await receiver.close();
  });

  test('the balance, signed and with the session, is the ledger balance in major units', async () => {
    const signed = await till.client.balance();
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    const bearer = await call(lipa.url, 'GET', '/api/v1/balance', { token: till.merchant.token });
    assert.equal(bearer.status, 200);
    assert.deepEqual(bearer.body, signed.body);
    const balance = signed.body as Balance;
    assert.equal(balance.currency, 'KES');
    assert.equal(balance.available, 150.5 - 55);
    assert.equal(cents(balance.available), await ledgerBalance(lipa, 'merchant', till.merchant.merchantId));
    assert.equal(balance.updatedAt, refunds[1]?.createdAt, 'when the balance last moved');
    // A merchant with nothing yet: 0, as of the account's opening.
    const fresh = await merchantWithPos(lipa);
    const empty = (await clientFor(lipa.url, fresh).balance()).body as Balance;
    assert.equal(empty.available, 0);
    assert.ok(!Number.isNaN(Date.parse(empty.updatedAt)));
  });

  test('every entry, newest first, signed: payments in, refunds out, each with its balanceAfter, reference and orderId', async () => {
    const page = await till.client.transactionPage();
    assert.equal(page.status, 200, JSON.stringify(page.body));
    const { data, nextCursor } = page.body as Page<Transaction>;
    assert.equal(nextCursor, null);
    assert.deepEqual(
      data.map((t) => [t.type, t.amount]),
      [
        ['refund', -50],
        ['refund', -5],
        ['payment', 50],
        ['payment', 40],
        ['payment', 30],
        ['payment', 20.5],
        ['payment', 10],
      ],
    );
    assert.equal(data[0]?.reference, refunds[1]?.refundIdentifier);
    assert.equal(data[0]?.balanceAfter, 95.5);
    assert.equal(data[6]?.balanceAfter, 10);
    for (const t of data) {
      assert.match(t.transactionId, /^ltx_/);
      assert.equal(t.currency, 'KES');
      assert.match(t.orderId ?? '', /^order-/);
    }
    // A refund carries its payment's orderId.
    assert.equal(data[0]?.orderId, data[2]?.orderId);
    assertReconciles([...data].reverse());
  });

  test('type, from and to filter; the bearer route answers as the signed one', async () => {
    const all = (await walk(lipa, till.merchant.token, '', 100)).seen;
    const only = (await walk(lipa, till.merchant.token, '&type=refund', 100)).seen;
    assert.deepEqual(
      only.map((t) => t.reference),
      refunds.map((r) => r.refundIdentifier).reverse(),
    );
    const signed = (await till.client.transactionPage({ type: 'refund' })).body as Page<Transaction>;
    assert.deepEqual(signed.data, only);
    // [from, to): from inclusive, to exclusive.
    const middle = all[3] as Transaction;
    const at = Date.parse(middle.occurredAt);
    const from = (await walk(lipa, till.merchant.token, `&from=${iso(at)}`, 100)).seen;
    assert.ok(from.every((t) => Date.parse(t.occurredAt) >= at));
    assert.ok(from.some((t) => t.transactionId === middle.transactionId));
    const to = (await walk(lipa, till.merchant.token, `&to=${iso(at)}`, 100)).seen;
    assert.ok(to.every((t) => Date.parse(t.occurredAt) < at));
    assert.equal(from.length + to.length, all.length, 'the two halves make the whole');
    assert.deepEqual((await walk(lipa, till.merchant.token, `&from=${iso(at + 3_600_000)}`, 100)).seen, []);
  });

  test('paging: each entry once, in order, whatever the page size; nextCursor null on the last page', async () => {
    const all = (await walk(lipa, till.merchant.token, '', 100)).seen;
    for (const limit of [1, 2, 3, 7]) {
      const { seen, pages } = await walk(lipa, till.merchant.token, '', limit);
      assert.deepEqual(seen, all, `limit ${limit}`);
      assert.equal(pages, Math.ceil(all.length / limit));
    }
  });

  test('the refusals: limit out of range, a bad cursor, another merchant cursor, a bad instant or type: 422 naming it', async () => {
    const get = (query: string, token = till.merchant.token) => call(lipa.url, 'GET', `/api/v1/transactions?${query}`, { token });
    for (const limit of ['0', '501', 'x', '1.5']) assertError(await get(`limit=${limit}`), 422, 'validation_failed', 'limit');
    const first = (await get('limit=2')).body as Page<Transaction>;
    const cursor = first.nextCursor as string;
    const [body, tag] = cursor.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify([1])).toString('base64url');
    for (const bad of [`${forged}.${tag}`, `${body}.${tag.slice(1)}x`, 'nonsense', `${body}.${tag}.x`])
      assertError(await get(`cursor=${encodeURIComponent(bad)}`), 422, 'validation_failed', 'cursor');
    const stranger = await merchantWithPos(lipa);
    assertError(await get(`cursor=${encodeURIComponent(cursor)}`, stranger.token), 422, 'validation_failed', 'cursor');
    for (const instant of ['2026-12-01', '2026-12-01T00:00:00', '2026-02-31T00:00:00Z', 'yesterday'])
      assertError(await get(`from=${encodeURIComponent(instant)}`), 422, 'validation_failed', 'from');
    assertError(await get('to=soon'), 422, 'validation_failed', 'to');
    assertError(await get('type=deposit'), 422, 'validation_failed', 'type');
    const signed = await till.client.transactionPage({ limit: 501 });
    assert.equal(signed.status, 422);
    assert.equal(await call(lipa.url, 'GET', '/api/v1/transactions').then((r) => r.status), 401);
  });

  test('the CSV of a range matches the JSON pages of the same range, row for row, oldest first', async () => {
    const all = (await walk(lipa, till.merchant.token, '', 2)).seen;
    const at = Date.parse((all[5] as Transaction).occurredAt);
    for (const query of ['', `from=${iso(at)}`, 'type=payment', `to=${iso(at)}`]) {
      const reply = await fetch(`${lipa.url}/api/v1/transactions.csv?${query}`, {
        headers: { authorization: `Bearer ${till.merchant.token}` },
      });
      assert.equal(reply.status, 200);
      assert.match(reply.headers.get('content-type') ?? '', /^text\/csv/);
      assert.match(reply.headers.get('content-disposition') ?? '', /attachment/);
      const text = await reply.text();
      assert.ok(text.startsWith('transactionId,type,amount,currency,balanceAfter,reference,orderId,occurredAt\r\n'));
      const rows = parseCsv(text);
      const json = (await walk(lipa, till.merchant.token, query ? `&${query}` : '', 3)).seen.reverse();
      assert.deepEqual(
        rows,
        json.map((t) => ({ ...t, amount: String(t.amount), balanceAfter: String(t.balanceAfter), orderId: t.orderId ?? '' })),
        `CSV ?${query}`,
      );
    }
    const bad = await call(lipa.url, 'GET', '/api/v1/transactions.csv?from=never', { token: till.merchant.token });
    assertError(bad, 422, 'validation_failed', 'from');
  });

  test('a settlement shows as a settlement, and the statement still reconciles', async () => {
    const reply = await admin(lipa, 'POST', `/api/v1/admin/merchants/${till.merchant.merchantId}/settlements`, {
      amount: 5.5,
      reference: unique('bank-'),
    });
    assert.equal(reply.status, 201, reply.text);
    const [latest] = ((await till.client.transactionPage({ limit: 1 })).body as Page<Transaction>).data;
    assert.deepEqual(
      [latest?.type, latest?.amount, latest?.reference, latest?.orderId],
      ['settlement', -5.5, reply.body.settlementId, undefined],
    );
    assert.equal(((await till.client.balance()).body as Balance).available, 90);
    // The same settlement again: 200 with the one recorded, and nothing moves; another amount: 409.
    const again = await admin(lipa, 'POST', `/api/v1/admin/merchants/${till.merchant.merchantId}/settlements`, {
      amount: 5.5,
      reference: reply.body.reference,
    });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, reply.body);
    const other = await admin(lipa, 'POST', `/api/v1/admin/merchants/${till.merchant.merchantId}/settlements`, {
      amount: 6,
      reference: reply.body.reference,
    });
    assertError(other, 409, 'idempotency_conflict');
    const tooMuch = await admin(lipa, 'POST', `/api/v1/admin/merchants/${till.merchant.merchantId}/settlements`, {
      amount: 90.01,
      reference: unique('bank-'),
    });
    assertError(tooMuch, 409, 'insufficient_balance');
    const unknown = await admin(lipa, 'POST', '/api/v1/admin/merchants/mer_nope/settlements', { amount: 1, reference: 'x' });
    assertError(unknown, 404, 'not_found');
    assertReconciles((await walk(lipa, till.merchant.token, '', 100)).seen.reverse());
  });

  test('a walk over 1,000 entries while another client adds more returns each old entry exactly once', async () => {
    const shop = await openTill(lipa, receiver);
    // 1,000 statement entries, written through the ledger as payments make them (an HTTP
    // payment each would take minutes): one refund transaction per entry pair is not needed.
    const merchant = accountId('merchant', shop.merchant.merchantId);
    const wallet = accountId('wallet', shop.payer.payerId);
    for (let batch = 0; batch < 10; batch++) {
      await lipa.ctx.store.write(async (tx) => {
        for (let i = 0; i < 100; i++)
          await postTransaction(
            tx,
            {
              kind: 'payment',
              reference: `pay_seed_${batch}_${i}`,
              postings: [
                { accountId: wallet, amount: -1 },
                { accountId: merchant, amount: 1 },
              ],
            },
            Date.now(),
          );
      });
    }
    const before = (await walk(lipa, shop.merchant.token, '', 500)).seen;
    assert.equal(before.length, 1000);
    // Walk in pages of 37 while real payments keep landing.
    let writing = true;
    const writer = (async () => {
      let made = 0;
      while (writing && made < 40) {
        await paidPayment(lipa, shop, receiver, 1);
        made++;
      }
      return made;
    })();
    const { seen } = await walk(lipa, shop.merchant.token, '', 37);
    writing = false;
    const made = await writer;
    const ids = seen.map((t) => t.transactionId);
    assert.equal(new Set(ids).size, ids.length, 'no entry twice');
    const old = new Set(before.map((t) => t.transactionId));
    assert.equal(ids.filter((id) => old.has(id)).length, 1000, 'every old entry once');
    assert.ok(made > 0, 'entries were written during the walk');
    assertReconciles([...seen].reverse());
  });
});

describe('migration 012 on a database with history', () => {
  test('the postings made before it become numbered statement entries that reconcile, and new ones follow on', async () => {
    const database = await freshDatabase();
    const old = await openDatabase(database.url, { upTo: '011_merchant_suspension' });
    // biome-ignore lint/suspicious/noExplicitAny: the schema of migration 011, not today's
    const db = old.db as unknown as Kysely<any>;
    await db.insertInto('categories').values({ id: 'cat-m', name: 'Migration test shops', mcc: '0001' }).execute();
    await db
      .insertInto('merchants')
      .values({ id: 'mer_m', login: 'm@shop.example', name: 'M', password_hash: 'x', created_at: 1 })
      .execute();
    await db
      .insertInto('points_of_sale')
      .values({
        id: 'pos_m',
        merchant_id: 'mer_m',
        terminal_id: 'T-M',
        category_id: 'cat-m',
        pos_company_name: 'M',
        description: 'd',
        website: 'https://m.example',
        result_url: 'https://m.example/r',
        server_url: 'https://m.example/s',
        trust_all_certificates: 0,
        created_at: 1,
      })
      .execute();
    const accounts = [
      { id: accountId('cash_in', 'system'), kind: 'cash_in', owner_id: 'system', balance: -1000 },
      { id: accountId('wallet', 'pyr_m'), kind: 'wallet', owner_id: 'pyr_m', balance: 700 },
      { id: accountId('merchant', 'mer_m'), kind: 'merchant', owner_id: 'mer_m', balance: 300 },
    ];
    await db
      .insertInto('ledger_accounts')
      .values(accounts.map((a) => ({ ...a, currency: 'KES', created_at: 1 })))
      .execute();
    const payments = [
      ['pay_m1', 'order-m1', 100, 20],
      ['pay_m2', 'order-m2', 200, 30],
    ] as const;
    for (const [id, order, amount, at] of payments)
      await db
        .insertInto('payments')
        .values({
          id,
          merchant_id: 'mer_m',
          pos_id: 'pos_m',
          terminal_id: 'T-M',
          api_key_id: 'key_m',
          order_id: order,
          amount,
          currency: 'KES',
          payer_phone: '254700000001',
          payer_id: 'pyr_m',
          callback_url: 'https://m.example/cb',
          fingerprint: 'f',
          status: 'paid',
          created_at: at,
          updated_at: at,
          expires_at: at + 1000,
        })
        .execute();
    const transactions = [
      ['ltx_d', 'deposit', 'pyr_m', 10, [accounts[0], -1000], [accounts[1], 1000]],
      ['ltx_1', 'payment', 'pay_m1', 20, [accounts[1], -100], [accounts[2], 100]],
      ['ltx_2', 'payment', 'pay_m2', 30, [accounts[1], -200], [accounts[2], 200]],
    ] as const;
    for (const [id, kind, reference, at, ...postings] of transactions) {
      await db.insertInto('ledger_transactions').values({ id, kind, reference, created_at: at }).execute();
      for (const [i, [account, amount]] of postings.entries())
        await db
          .insertInto('ledger_postings')
          .values({ id: `lpo_${id}_${i}`, transaction_id: id, account_id: account?.id, amount, created_at: at })
          .execute();
    }
    await old.close();

    const upgraded = await openDatabase(database.url);
    try {
      const entries = await upgraded.db
        .selectFrom('ledger_entries')
        .select(['account_id', 'seq', 'kind', 'amount', 'balance_after', 'reference', 'order_id'])
        .orderBy('account_id')
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        entries.map((e) => [e.account_id, Number(e.seq), e.kind, Number(e.amount), Number(e.balance_after), e.reference, e.order_id]),
        [
          [accountId('merchant', 'mer_m'), 1, 'payment', 100, 100, 'pay_m1', 'order-m1'],
          [accountId('merchant', 'mer_m'), 2, 'payment', 200, 300, 'pay_m2', 'order-m2'],
          [accountId('wallet', 'pyr_m'), 1, 'deposit', 1000, 1000, 'pyr_m', null],
          [accountId('wallet', 'pyr_m'), 2, 'payment', -100, 900, 'pay_m1', 'order-m1'],
          [accountId('wallet', 'pyr_m'), 3, 'payment', -200, 700, 'pay_m2', 'order-m2'],
        ],
        'the cash-in account has no statement',
      );
      assert.deepEqual((await checkLedger(upgraded.db)).statements, []);
      // A new posting is numbered after them.
      await upgraded.write((tx) =>
        postTransaction(
          tx,
          {
            kind: 'settlement',
            reference: 'stl_m',
            postings: [
              { accountId: accountId('merchant', 'mer_m'), amount: -50 },
              { accountId: accountId('wallet', 'pyr_m'), amount: 50 },
            ],
          },
          40,
        ),
      );
      const last = await upgraded.db
        .selectFrom('ledger_entries')
        .select(['seq', 'balance_after'])
        .where('account_id', '=', accountId('merchant', 'mer_m'))
        .orderBy('seq', 'desc')
        .executeTakeFirstOrThrow();
      assert.deepEqual([Number(last.seq), Number(last.balance_after)], [3, 250]);
      assert.deepEqual((await checkLedger(upgraded.db)).statements, []);
      // Run again (SQLite migrates outside a transaction, so a start cut short runs it again): no change, no error.
      await up(upgraded.db as unknown as Kysely<never>);
      assert.equal((await upgraded.db.selectFrom('ledger_entries').select('seq').execute()).length, 7);
    } finally {
      await upgraded.close();
      await database.drop();
    }
  });
});
