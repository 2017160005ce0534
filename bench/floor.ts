/**
 * What the durable writes alone cost: the rows each benchmarked request must write, written
 * with raw better-sqlite3 on the service's own schema (its migrations), `synchronous=FULL`,
 * in batches of 32 per commit (about what the group commit reaches at 64 connections), with
 * no HTTP, no signature, no reads and no JavaScript of the service. No version of the
 * service can write these rows faster on one thread, so this bounds each scenario from above.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { openDatabase } from '../src/db/database.js';
import { randomId } from '../src/security/tokens.js';

const BATCH = 32;
const randomHex = () => randomBytes(16).toString('hex');

export interface Floor {
  name: string;
  /** Wall-clock µs per request, commit included. */
  micros: number;
  /** Of which the commits' share (writing the WAL, then fsync). */
  commitMicros: number;
  /** WAL pages each commit wrote, on average. */
  pagesPerCommit: number;
}

type Step = (i: number) => void;

/**
 * Runs `steps` for `count` requests, each step in its own commits of BATCH requests, as the
 * service's writes of one request land in separate group commits. WAL pages are counted by
 * a passive checkpoint every 64 commits, outside the timing (which only lowers the floor).
 */
function measure(sqlite: BetterSqlite3.Database, name: string, count: number, steps: Step[]): Floor {
  const begin = sqlite.prepare('begin immediate');
  const commit = sqlite.prepare('commit');
  sqlite.pragma('wal_checkpoint(TRUNCATE)');
  let commitNs = 0n;
  let checkpointNs = 0n;
  let commits = 0;
  let pages = 0;
  const start = process.hrtime.bigint();
  for (let first = 0; first < count; first += BATCH) {
    for (const step of steps) {
      begin.run();
      for (let i = first; i < first + BATCH; i++) step(i);
      const before = process.hrtime.bigint();
      commit.run();
      commitNs += process.hrtime.bigint() - before;
      if (++commits % 64 === 0) {
        const checkpoint = process.hrtime.bigint();
        const [result] = sqlite.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
        pages += result?.log ?? 0;
        checkpointNs += process.hrtime.bigint() - checkpoint;
      }
    }
  }
  const wallNs = process.hrtime.bigint() - start - checkpointNs;
  return {
    name,
    micros: Number(wallNs) / 1000 / count,
    commitMicros: Number(commitNs) / 1000 / count,
    pagesPerCommit: pages / (commits - (commits % 64)),
  };
}

export async function measureFloors(count = 40_000): Promise<Floor[]> {
  const dir = mkdtempSync(join(tmpdir(), 'lipa-floor-'));
  const file = join(dir, 'floor.sqlite');
  try {
    // The schema exactly as the service creates it.
    await (await openDatabase(`file:${file}`)).close();
    const sqlite = new BetterSqlite3(file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    // The service checks foreign keys; leaving them out only lowers the floor.
    sqlite.pragma('foreign_keys = OFF');
    // Checkpoints are run by measure(), outside the timing.
    sqlite.pragma('wal_autocheckpoint = 0');
    const insert = (table: string) => {
      const columns = (sqlite.prepare(`select name from pragma_table_info('${table}')`).all() as { name: string }[]).map((c) => c.name);
      const statement = sqlite.prepare(`insert into ${table} (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`);
      return (row: Record<string, unknown>) => statement.run(columns.map((c) => row[c] ?? null));
    };
    const nonce = insert('nonces');
    const payment = insert('payments');
    const message = insert('messages');
    const now = Date.now();
    const paymentRow = (i: number) => ({
      id: randomId('pay_'),
      merchant_id: 'mer_floor',
      pos_id: 'pos_floor',
      terminal_id: 'T-floor',
      api_key_id: 'key_floor',
      order_id: `order-${i}-${randomHex()}`,
      amount: 150_050,
      currency: 'KES',
      merchant_stika: 'KES_123456',
      description: 'Bench order',
      payer_phone: '254712345678',
      payer_id: 'pyr_floor',
      callback_url: 'https://merchant.example/callbacks/lipa',
      fingerprint: randomHex() + randomHex(),
      status: 'pending',
      refunded_amount: 0,
      created_at: now,
      updated_at: now,
      expires_at: now + 120_000,
    });
    const smsRow = (purpose: string, status: string, merchant: string | null) => ({
      id: randomId('msg_'),
      merchant_id: merchant,
      messaging_key_id: merchant && 'mk_floor',
      purpose,
      type: 'sms',
      phone_country_code: '254',
      phone_number: '712345678',
      content: 'Duka asks you to pay KES 1,500.50 for order 1234. Open your Lipa wallet to accept or decline.',
      segments: 1,
      status,
      created_at: now,
      updated_at: now,
      attempts: 0,
      next_attempt_at: now,
      locked_until: status === 'queued' ? now + 30_000 : 0,
    });
    const nonceRow = () => ({ key_id: 'key_floor', nonce: randomHex(), expires_at: now + 660_000 });

    const floors = [
      measure(sqlite, '(a) creation: nonce, payment, SMS prompt', count, [
        () => {
          nonce(nonceRow());
          payment(paymentRow(0));
          message(smsRow('payment_prompt', 'delivered', null));
        },
      ]),
      measure(sqlite, '(b) status: nonce', count, [() => nonce(nonceRow())]),
      measure(sqlite, '(d) SMS, embedded outbox: the message', count, [() => message(smsRow('api', 'delivered', 'mer_floor'))]),
    ];

    // (e): stored queued, then its attempt recorded, then its receipt, each in its own commit.
    const ids: string[] = [];
    const sent = sqlite.prepare(
      `update messages set status = 'sent', provider_id = ?, attempts = 1, next_attempt_at = ?, locked_until = 0, last_error = null,
       content = '', updated_at = ? where id = ? and locked_until > 0`,
    );
    const receipt = sqlite.prepare(
      `update messages set status = 'delivered', last_error = null, updated_at = ? where provider_id = ? and status in ('sent', 'queued')`,
    );
    floors.push(
      measure(sqlite, '(e) SMS via SMPP: stored, sent, receipt', count, [
        (i) => {
          const row = smsRow('api', 'queued', 'mer_floor');
          ids[i] = row.id;
          message(row);
        },
        (i) => sent.run(`smsc-${i}`, now, now, ids[i]),
        (i) => receipt.run(now, `smsc-${i}`),
      ]),
    );
    sqlite.close();
    return floors;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
