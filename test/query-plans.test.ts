import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Compilable, CompiledQuery, sql } from 'kysely';
import { merchantMessagesQuery } from '../src/messaging/list-messages.js';
import { dueLoginCodes } from '../src/messaging/messenger.js';
import { outboxQuery } from '../src/messaging/outbox.js';
import { keptReceiptsMatched } from '../src/messaging/receipts.js';
import { OPEN_WORK } from '../src/ops/metrics.js';
import { payersQuery } from '../src/payers/payers.js';
import { paymentsQuery } from '../src/payments/list-payments.js';
import { walletPaymentsQuery } from '../src/wallet/wallet.js';
import { ON_POSTGRES, storeForSuite } from './helpers/harness.js';

/**
 * Reads that a merchant, a payer, an operator or a background job makes over the tables that
 * grow without end (payments, messages, payers) go through an index, never a scan: on SQLite a
 * read blocks the event loop, and with 2 million payments a scan froze every request for a
 * second or more (docs/performance.md). SQLite's plans are fixed by its rules (the service
 * never runs ANALYZE), so they are checked index by index; PostgreSQL is told to avoid scans,
 * so a plan that still scans a table has no index to use for it.
 */
describe('query plans: no scan of a table that grows', () => {
  const suite = storeForSuite();

  async function planOf(query: Compilable<unknown>): Promise<string> {
    const { sql: text, parameters } = query.compile();
    return suite.store.db.transaction().execute(async (tx) => {
      if (ON_POSTGRES) await sql`set local enable_seqscan = off`.execute(tx);
      const explained = await tx.executeQuery(
        CompiledQuery.raw(`${ON_POSTGRES ? 'explain' : 'explain query plan'} ${text}`, [...parameters]),
      );
      return explained.rows.map((row) => String(Object.values(row as object).at(-1))).join('\n');
    });
  }

  /**
   * The plan reads `table` (as aliased) through the index: on SQLite `index` (a pattern of the
   * plan's words for it), on PostgreSQL the index named `pgIndex`, and never by a scan.
   */
  async function assertIndexed(query: Compilable<unknown>, table: string, index: string, pgIndex: string, alias = table) {
    const plan = await planOf(query);
    if (ON_POSTGRES) {
      assert.doesNotMatch(plan, new RegExp(`Seq Scan on ${table}\\b`), plan);
      assert.match(plan, new RegExp(`Index (Only )?Scan (Backward )?using ${pgIndex} on ${table}\\b`), plan);
    } else {
      assert.doesNotMatch(plan, new RegExp(`^SCAN ${alias}\\b`, 'm'), plan);
      assert.match(plan, new RegExp(`^SEARCH ${alias} USING (COVERING )?INDEX ${index}(?!\\w)`, 'm'), plan);
    }
    return plan;
  }

  /** The first page, and a later one: beyond a cursor's (created_at, id). */
  const PAGES = [undefined, [1_700_000_000_000, 'pay_x']] as const;

  test("a merchant's payments: newest first, of one status, by order id; each page", async () => {
    const db = suite.store.db;
    for (const after of PAGES) {
      const newest = await assertIndexed(
        paymentsQuery(db, 'm', { limit: 50, after }),
        'payments',
        'payments_merchant',
        'payments_merchant',
      );
      // Walked in order: sorted only within one millisecond's payments (the id breaks ties), never all of them.
      if (!ON_POSTGRES) assert.doesNotMatch(newest, /TEMP B-TREE FOR ORDER BY/, 'walked in order, not sorted');
      // A later page starts within the index, at the cursor's time, not at the merchant's newest.
      if (after && !ON_POSTGRES) assert.match(newest, /payments_merchant \(merchant_id=\? AND created_at<\?\)/, newest);
      for (const status of ['pending', 'no_user', 'paid'] as const) {
        const plan = await assertIndexed(
          paymentsQuery(db, 'm', { status, limit: 50, after }),
          'payments',
          'payments_merchant_status',
          'payments_merchant_status',
        );
        if (!ON_POSTGRES) assert.doesNotMatch(plan, /TEMP B-TREE/, 'walked in order, not sorted');
      }
      // The unique (terminal_id, order_id) constraint's index, which SQLite names itself.
      const terminalOrder = 'sqlite_autoindex_payments_\\d+ \\(terminal_id=\\? AND order_id=\\?\\)';
      for (const status of [undefined, 'paid'] as const)
        await assertIndexed(
          paymentsQuery(db, 'm', { orderId: 'o-1', status, limit: 50, after }),
          'payments',
          terminalOrder,
          'payments_terminal_order',
        );
    }
  });

  test('the login codes due, which the messaging worker claims first: in their own index', async () => {
    for (const busy of [[], ['msg_1', 'msg_2']]) {
      const plan = await assertIndexed(
        dueLoginCodes(suite.store.db, Date.now(), busy, 64),
        'messages',
        'messages_due_codes',
        'messages_due_codes',
      );
      if (!ON_POSTGRES) assert.doesNotMatch(plan, /TEMP B-TREE/, 'walked in order, not sorted');
    }
  });

  test("a payer's payments (the wallet): all, or of one status, found by the payer's phone; each page", async () => {
    for (const after of PAGES)
      for (const status of [undefined, 'pending', 'paid'] as const) {
        const index = status === undefined ? 'payments_payer \\(payer_phone=\\?\\)' : 'payments_payer \\(payer_phone=\\? AND status=\\?\\)';
        await assertIndexed(walletPaymentsQuery(suite.store.db, 'payer', status, 50, after), 'payments', index, 'payments_payer', 'p');
      }
  });

  test("the operator's payers, newest first; each page", async () => {
    for (const after of PAGES) {
      const plan = await planOf(payersQuery(suite.store.db, 50, after));
      // PostgreSQL plans by its statistics: on these empty tables a later page may read the index as a bitmap.
      if (ON_POSTGRES) assert.match(plan, /(Index (Only )?Scan Backward using|Bitmap Index Scan on) payers_created\b/, plan);
      if (ON_POSTGRES) assert.doesNotMatch(plan, /Seq Scan on payers\b/, plan);
      else if (after) assert.match(plan, /^SEARCH p USING (COVERING )?INDEX payers_created \(created_at<\?\)/m, plan);
      else assert.match(plan, /^SCAN p USING (COVERING )?INDEX payers_created\b/m, plan);
      if (!ON_POSTGRES) assert.doesNotMatch(plan, /TEMP B-TREE/, plan);
    }
  });

  test("a merchant's messages and the operator's outbox, newest first; each page", async () => {
    for (const after of PAGES) {
      const own = await assertIndexed(
        merchantMessagesQuery(suite.store.db, 'm', 50, after),
        'messages',
        'messages_merchant',
        'messages_merchant',
      );
      const outbox = await planOf(outboxQuery(suite.store.db, 50, after));
      if (ON_POSTGRES) assert.match(outbox, /(Index Scan Backward using|Bitmap Index Scan on) messages_created\b/, outbox);
      if (ON_POSTGRES) assert.doesNotMatch(outbox, /Seq Scan on messages\b/, outbox);
      else
        assert.match(
          outbox,
          after ? /^SEARCH messages USING INDEX messages_created \(created_at<\?\)/m : /^SCAN messages USING INDEX messages_created\b/m,
          outbox,
        );
      if (!ON_POSTGRES) for (const plan of [own, outbox]) assert.doesNotMatch(plan, /TEMP B-TREE FOR ORDER BY/, plan);
    }
  });

  test('kept receipts are matched from the receipts, each message found by its SMSC id', async () => {
    const plan = await planOf(keptReceiptsMatched(suite.store.db));
    // PostgreSQL orders joins by its statistics (it analyses tables itself), so on these empty
    // tables its choice says nothing; nor does its read hold up other requests.
    if (ON_POSTGRES) assert.doesNotMatch(plan, /Seq Scan on messages\b/, plan);
    else {
      // The outer loop is the kept receipts; no walk of the messages still sent.
      assert.match(plan.split('\n')[0] ?? '', /^SCAN e\b/, plan);
      assert.match(plan, /^SEARCH m USING INDEX messages_provider\b/m, plan);
      assert.doesNotMatch(plan, /messages_due/, plan);
    }
  });

  test("/metrics's gauges count within an index", async () => {
    for (const query of Object.values(OPEN_WORK)) {
      const plan = await planOf(query(suite.store.db));
      assert.doesNotMatch(plan, ON_POSTGRES ? /Seq Scan/ : /^SCAN /m, plan);
    }
  });
});
