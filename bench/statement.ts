/**
 * The statement scenarios' data: a merchant with ENTRIES ledger entries (default 1,000,000),
 * written straight into the service's database (an HTTP payment each would take hours), and
 * the CSV export measured as a client reads it. The rows are shaped as the service writes
 * them; only (h) and (i) read them.
 */
import BetterSqlite3 from 'better-sqlite3';

export const ENTRIES = Number(process.env.BENCH_ENTRIES ?? 1_000_000);
/** The first seeded entry's time; each next one a millisecond later. */
export const SEED_START = Date.UTC(2026, 0, 1);

/** Writes entries 1…count of the merchant's account (and numbers the account to match). */
export async function seedStatement(databaseUrl: string, merchantId: string, count = ENTRIES): Promise<void> {
  const account = `acct_merchant_${merchantId}_KES`;
  const select = (n: string) => `
    select '${account}', ${n}, 'ltx_seed_' || ${n}, case when ${n} % 10 = 0 then 'refund' else 'payment' end,
      case when ${n} % 10 = 0 then -100 else 100 end, 100 * ${n}, 'pay_seed_' || ${n}, 'order-' || ${n}, ${SEED_START} + ${n}`;
  const insert =
    'insert into ledger_entries (account_id, seq, transaction_id, kind, amount, balance_after, reference, order_id, created_at)';
  if (databaseUrl.startsWith('file:')) {
    const db = new BetterSqlite3(databaseUrl.slice('file:'.length));
    db.pragma('busy_timeout = 10000');
    db.exec(`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${count}) ${insert} ${select('i')} from n`);
    db.prepare('update ledger_accounts set entries = ? where id = ?').run(count, account);
    db.close();
    return;
  }
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`${insert} ${select('i')} from generate_series(1, ${count}) as i`);
  await client.query('update ledger_accounts set entries = $1 where id = $2', [count, account]);
  await client.query('analyze ledger_entries');
  await client.end();
}

export interface CsvRun {
  rows: number;
  seconds: number;
  /** The service's resident memory before the export, and the most sampled during it (MiB). */
  idleMiB: number;
  peakMiB: number;
}

/** Downloads the whole CSV as a client would, sampling the service's memory every 20 ms. */
export async function measureCsv(url: string, token: string, rss: () => number): Promise<CsvRun> {
  const idleMiB = rss();
  let peakMiB = idleMiB;
  const sampler = setInterval(() => {
    peakMiB = Math.max(peakMiB, rss());
  }, 20);
  const started = performance.now();
  const response = await fetch(`${url}/api/v1/transactions.csv`, { headers: { authorization: `Bearer ${token}` } });
  if (!response.ok || !response.body) throw new Error(`CSV export: ${response.status}`);
  let lines = 0;
  for await (const chunk of response.body) {
    const bytes = chunk as Uint8Array;
    for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) lines++;
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peakMiB = Math.max(peakMiB, rss());
  return { rows: lines - 1, seconds, idleMiB, peakMiB };
}
