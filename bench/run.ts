/**
 * `npm run bench`: starts the service (SQLite by default, `-- --postgres` for PostgreSQL),
 * drives it from this separate process on 127.0.0.1 with autocannon, a fresh nonce and
 * signature per request, and prints a table against a bare Fastify baseline measured in the
 * same run. Bounded: each scenario runs BENCH_SECONDS (default 10) and stops by itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { signRequest } from '../src/client/signing.js';
import { type Floor, measureFloors } from './floor.js';
import { ENTRIES, measureCsv, SEED_START, seedStatement } from './statement.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const POSTGRES = process.argv.includes('--postgres');
/** BENCH_ONLY=a (or b … i; several: BENCH_ONLY=cg) runs some scenarios, e.g. for a CPU profile of one. */
const ONLY = process.env.BENCH_ONLY;
const wanted = (scenario: string) => !ONLY || ONLY.includes(scenario);
const ADMIN_TOKEN = 'bench-admin-token-0123456789';

interface Started {
  child: ChildProcess;
  url: string;
}

async function startProcess(args: string[], env: Record<string, string>, ready: (line: string) => string | null): Promise<Started> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of output.split('\n')) {
        const url = ready(line);
        if (url) {
          child.stdout?.off('data', onData);
          child.stderr?.off('data', onData);
          child.stdout?.resume();
          child.stderr?.resume();
          resolve({ child, url });
          return;
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`process exited ${code}: ${output}`)));
  });
}

/** CPU seconds (user + system) a process has used so far (Linux /proc, 100 ticks/s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds one thread of a process has used so far (the main thread's id is the pid). */
function threadCpuSeconds(pid: number, tid: number): number {
  const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Peak and current resident memory of a process, in MiB (Linux /proc). */
function memory(pid: number): { peak: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { peak: kb('VmHWM') / 1024, rss: kb('VmRSS') / 1024 };
}

async function json(url: string, method: string, body: unknown, token?: string) {
  const response = await fetch(url, {
    method,
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const data = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${JSON.stringify(data)}`);
  return data;
}

interface Row {
  scenario: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  peakMiB: number;
  rssStart: number;
  rssEnd: number;
  /** The highest resident memory sampled in the first and in the second half of the run. */
  rssHalves: [number, number];
  /** Share of one core the server used during the run. */
  cpu: number;
  /** Share of one core the server's main thread (its event loop) used. */
  mainCpu: number;
  /** Share of one core this load-generating process used during the run. */
  loadCpu: number;
}

async function load(name: string, pid: number, options: autocannon.Options): Promise<Row> {
  const rssStart = memory(pid).rss;
  const cpuStart = cpuSeconds(pid);
  const loadStart = process.cpuUsage();
  const mainStart = threadCpuSeconds(pid, pid);
  // Resident memory once a second: flat memory means the second half of the run peaks no
  // higher than the first.
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(memory(pid).rss), 1000);
  const result = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
  clearInterval(sampler);
  const half = Math.floor(samples.length / 2);
  const mainCpu = (threadCpuSeconds(pid, pid) - mainStart) / SECONDS;
  const cpu = (cpuSeconds(pid) - cpuStart) / SECONDS;
  const loadUsage = process.cpuUsage(loadStart);
  const loadCpu = (loadUsage.user + loadUsage.system) / 1e6 / SECONDS;
  const mem = memory(pid);
  return {
    scenario: name,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    peakMiB: mem.peak,
    rssStart,
    rssEnd: mem.rss,
    rssHalves: [Math.max(0, ...samples.slice(0, half)), Math.max(0, ...samples.slice(half))],
    cpu,
    mainCpu,
    loadCpu,
  };
}

/**
 * Signed requests for one scenario, each with its own nonce, timestamp and signature. They
 * are signed before the timed run (up to BENCH_PRESIGN, default 150,000; after that each is
 * signed as it is sent), so that the load generator, which shares this machine's two cores
 * with the service, spends about what it spends on the unsigned baseline (c) instead of
 * ~30 µs a request on JSON and HMACs. The service still checks every signature and nonce.
 */
function signedRequests(
  setup: { keyId: string; secret: string },
  url: string,
  makeBody: () => string,
): () => { body: string; headers: Record<string, string> } {
  const make = () => {
    const body = makeBody();
    const headers = signRequest({ keyId: setup.keyId, secret: setup.secret, method: 'POST', url, body });
    return { body, headers: { ...headers, 'content-type': 'application/json' } };
  };
  const ready = Array.from({ length: Number(process.env.BENCH_PRESIGN ?? 150_000) }, make);
  let next = 0;
  return () => {
    const request = ready[next];
    if (request === undefined) return make();
    ready[next++] = undefined as never;
    return request;
  };
}

/** Merchants number their orders; a run-unique prefix keeps reruns on one database apart. */
const RUN = randomBytes(3).toString('hex');
let orderSeq = 0;

function paymentBody(terminalId: string) {
  return {
    terminalId,
    currency: 'KES',
    amount: 1500.5,
    merchantStika: 'KES_100234',
    orderId: `order-${RUN}-${String(++orderSeq).padStart(9, '0')}`,
    description: 'Benchmark payment',
    payer: { method: 'phone', value: '254708000003' },
    urls: { callbackUrl: 'http://127.0.0.1:9/callback' },
  };
}

async function main(): Promise<void> {
  const rows: Row[] = [];

  // (c) the baseline, alone on the machine.
  const baseline = await startProcess(['--import', 'tsx', 'bench/baseline-server.ts'], {}, (l) => {
    const port = /^listening (\d+)/.exec(l)?.[1];
    return port ? `http://127.0.0.1:${port}` : null;
  });
  const sample = JSON.stringify(paymentBody('T-1'));
  if (wanted('c'))
    rows.push(
      await load('(c) bare Fastify, same body + schema', baseline.child.pid as number, {
        url: `${baseline.url}/api/public/v1/merchant-payments`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: sample,
      }),
    );
  baseline.child.kill('SIGTERM');

  // The service.
  const dir = mkdtempSync(join(tmpdir(), 'lipa-bench-'));
  let pgStop: (() => Promise<void>) | null = null;
  let databaseUrl = `file:${join(dir, 'lipa.sqlite')}`;
  if (POSTGRES) {
    const { startThrowawayPostgres } = await import('../scripts/pg-throwaway.mjs');
    const pg = await startThrowawayPostgres();
    notes.push(`database: ${pg.server}`);
    databaseUrl = pg.url;
    pgStop = pg.stop;
  }
  const { child: lipa, url } = await startService(databaseUrl, {});
  try {
    const setup = await merchantSetup(url);
    const pid = lipa.pid as number;

    // (a) signed payment creation: fresh order, nonce and signature per request.
    if (wanted('a')) {
      const next = signedRequests(setup, url, () => JSON.stringify(paymentBody(setup.terminalId)));
      rows.push(
        await load('(a) signed payment creation', pid, {
          url,
          requests: [{ method: 'POST', path: '/api/public/v1/merchant-payments', setupRequest: (request) => ({ ...request, ...next() }) }],
        }),
      );
    }

    // (b) signed status of existing payments.
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) ids.push(await createOne(url, setup));
    if (wanted('b')) {
      const next = signedRequests(setup, url, () => JSON.stringify({ paymentIdentifier: ids[Math.floor(Math.random() * ids.length)] }));
      rows.push(
        await load('(b) signed payment status', pid, {
          url,
          requests: [
            { method: 'POST', path: '/api/public/v1/merchant-payments/status', setupRequest: (request) => ({ ...request, ...next() }) },
          ],
        }),
      );
    }
    // (d) SMS through the embedded outbox (stored = delivered).
    const messagingKey = await messagingKeyOf(url);
    if (wanted('d')) rows.push(await load('(d) SMS, embedded outbox: accepted', pid, smsRequest(url, messagingKey)));

    // (g) signed refund creation: 0.01 at a time of 20 large paid payments, a fresh reference each.
    if (wanted('g')) {
      const paid = await paidPayments(url, setup, 20);
      let refundSeq = 0;
      const next = signedRequests(setup, url, () =>
        JSON.stringify({
          paymentIdentifier: paid[refundSeq % paid.length],
          refundReference: `rf-${RUN}-${++refundSeq}`,
          amount: 0.01,
        }),
      );
      rows.push(
        await load('(g) signed refund creation', pid, {
          url,
          requests: [
            { method: 'POST', path: '/api/public/v1/merchant-payments/refunds', setupRequest: (request) => ({ ...request, ...next() }) },
          ],
        }),
      );
    }

    // (h) one 100-entry page of a merchant with ENTRIES entries: the first page, and one at the end of the walk.
    if (wanted('h') || wanted('i')) {
      const statement = await merchantSetup(url);
      const seeded = performance.now();
      await seedStatement(databaseUrl, statement.merchantId);
      notes.push(
        `(h, i) ${ENTRIES} statement entries written in ${((performance.now() - seeded) / 1000).toFixed(1)} s (setup, not timed).`,
      );
      const auth = { authorization: `Bearer ${statement.token}` };
      if (wanted('h')) {
        // The page before the 1,000 oldest entries' last page: its cursor comes from a range ending there.
        const near = (await json(
          `${url}/api/v1/transactions?limit=100&to=${new Date(SEED_START + 1001).toISOString()}`,
          'GET',
          undefined,
          statement.token,
        )) as {
          nextCursor: string;
        };
        for (const [name, query] of [
          [`(h) statement page, first of ${ENTRIES.toLocaleString('en')}`, ''],
          ['(h) statement page, deep (entries 900-801)', `&cursor=${encodeURIComponent(near.nextCursor)}`],
        ] as const) {
          rows.push(await load(name, pid, { url: `${url}/api/v1/transactions?limit=100${query}`, headers: auth }));
        }
      }
      if (wanted('i')) {
        const csv = await measureCsv(url, statement.token, () => memory(pid).rss);
        notes.push(
          `(i) CSV export: ${csv.rows} rows in ${csv.seconds.toFixed(1)} s = ${(csv.rows / csv.seconds).toFixed(0)} rows/s; ` +
            `service RSS ${csv.idleMiB.toFixed(0)} MiB idle before, at most ${csv.peakMiB.toFixed(0)} MiB during (+${(csv.peakMiB - csv.idleMiB).toFixed(0)} MiB).`,
        );
        if (csv.rows !== ENTRIES) notes.push(`(i) WARNING: ${ENTRIES} entries but ${csv.rows} CSV rows`);
      }
    }
  } finally {
    lipa.kill('SIGTERM');
    await new Promise((r) => lipa.once('exit', r));
  }

  // (e) SMS into a local SMPP peer with delivery receipts: accepted, submitted, end to end.
  if (wanted('e') && !POSTGRES) rows.push(...(await smsThroughSmpp(join(dir, 'smpp.sqlite'))));
  if (pgStop) await pgStop();
  rmSync(dir, { recursive: true, force: true });
  print(rows);
  for (const note of notes) console.log(note);
  // (f) what the durable writes alone cost, and what that leaves of each target.
  if (wanted('f') && !POSTGRES)
    printFloors(
      await measureFloors(),
      rows.find((r) => r.scenario.startsWith('(c)')),
    );
}

const notes: string[] = [];

async function startService(databaseUrl: string, env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  // BENCH_PROFILE=dir writes a V8 CPU profile of the service (open it in Chrome DevTools).
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const child = spawn(process.execPath, [...profile, 'dist/src/main.js'], {
    env: {
      ...process.env,
      PORT: String(port),
      MOCK_PORT: '0',
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_KEY_PER_SEC: '1000000',
      PAYMENT_TTL_SECONDS: '3600',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHealth(url);
  return { child, url };
}

async function messagingKeyOf(url: string): Promise<string> {
  const login = `sms-${randomBytes(4).toString('hex')}@shop.example`;
  await json(`${url}/api/v1/admin/merchants`, 'POST', { login, password: 'benchmark password', name: 'Bench SMS' }, ADMIN_TOKEN);
  await json(`${url}/api/v1/authorization`, 'POST', { login, password: 'benchmark password' });
  const { token } = (await json(`${url}/api/v1/authorization/confirm`, 'POST', { login, otp: '534789' })) as { token: string };
  const { apiKey } = (await json(`${url}/api/v1/messaging-keys`, 'POST', {}, token)) as { apiKey: string };
  return apiKey;
}

function smsRequest(url: string, apiKey: string): autocannon.Options {
  return {
    url: `${url}/api/messages`,
    method: 'POST',
    headers: { 'content-type': 'application/json', api_key: apiKey },
    body: JSON.stringify({
      message: { type: 'sms', phone: { country_code: '254', number: '712345678' }, content: 'Your Lipa order 42 is ready for collection.' },
    }),
  };
}

async function smsThroughSmpp(file: string): Promise<Row[]> {
  const { startSmppPeer } = await import('../test/helpers/smpp-peer.js');
  const peer = await startSmppPeer({ receipts: true });
  const { child, url } = await startService(`file:${file}`, { SMPP_URL: peer.url });
  const pid = child.pid as number;
  try {
    const apiKey = await messagingKeyOf(url);
    const before = peer.submitted.length;
    const started = Date.now();
    const row = await load('(e) SMS via SMPP peer + receipts: accepted', pid, smsRequest(url, apiKey));
    const loadSeconds = (Date.now() - started) / 1000;
    const accepted = Math.round(row.rps * SECONDS);
    const submittedDuringLoad = peer.submitted.length - before;
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(file, { readonly: true });
    const count = (status: string) =>
      (db.prepare('select count(*) as n from messages where status = ? and purpose = ?').get(status, 'api') as { n: number }).n;
    const queuedAtStop = count('queued');
    const drainStart = Date.now();
    while (count('queued') > 0 && Date.now() - drainStart < 60_000) await new Promise((r) => setTimeout(r, 100));
    while (count('sent') > 0 && Date.now() - drainStart < 60_000) await new Promise((r) => setTimeout(r, 100));
    const drainSeconds = (Date.now() - drainStart) / 1000;
    const total = (db.prepare("select count(*) as n from messages where purpose = 'api'").get() as { n: number }).n;
    const delivered = count('delivered');
    const submitted = peer.submitted.length - before;
    db.close();
    const endToEnd = submitted / (loadSeconds + drainSeconds);
    notes.push(
      `(e) SMPP: ${total} stored, ${submittedDuringLoad} submit_sm reached the peer during the ${loadSeconds.toFixed(1)} s load ` +
        `(${(submittedDuringLoad / loadSeconds).toFixed(0)}/s), ${queuedAtStop} still queued when it stopped, drained in ${drainSeconds.toFixed(1)} s; ` +
        `${submitted} submitted in all, ${delivered} delivered by receipt; end to end ${endToEnd.toFixed(0)} messages/s (stored → submitted, load + drain).`,
    );
    if (accepted > total) notes.push(`(e) WARNING: ${accepted} accepted but only ${total} stored`);
    return [row, { ...row, scenario: '(e) … end to end, stored → submit_sm', rps: endToEnd }];
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await peer.close();
  }
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('service did not start');
}

async function merchantSetup(url: string) {
  const login = `bench-${randomBytes(4).toString('hex')}@shop.example`;
  const merchant = await json(
    `${url}/api/v1/admin/merchants`,
    'POST',
    { login, password: 'benchmark password', name: 'Bench' },
    ADMIN_TOKEN,
  );
  await json(`${url}/api/v1/authorization`, 'POST', { login, password: 'benchmark password' });
  const { token } = (await json(`${url}/api/v1/authorization/confirm`, 'POST', { login, otp: '534789' })) as { token: string };
  const key = (await json(`${url}/api/v1/api-keys`, 'POST', {}, token)) as { keyId: string; secret: string };
  const categories = (await (await fetch(`${url}/api/v1/categories`)).json()) as { categoryId: string }[];
  const terminalId = `BENCH-${randomBytes(4).toString('hex')}`;
  await json(
    `${url}/api/v1/points-of-sale`,
    'POST',
    {
      categoryId: categories[0]?.categoryId,
      posCompanyName: 'Bench Duka',
      description: 'benchmark',
      website: 'https://bench.example',
      resultUrl: 'http://127.0.0.1:9/result',
      serverUrl: 'https://bench.example/api',
      trustAllCertificates: false,
      terminalId,
      merchantId: merchant.merchantId,
    },
    token,
  );
  return { keyId: key.keyId, secret: key.secret, terminalId, token, merchantId: merchant.merchantId as string };
}

/** `count` payments of 250,000 that staging test payer 254708000001 pays (about a second after each is made). */
async function paidPayments(url: string, setup: { keyId: string; secret: string; terminalId: string }, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++)
    ids.push(await createOne(url, setup, { amount: 250_000, payer: { method: 'phone', value: '254708000001' } }));
  const deadline = Date.now() + 30_000;
  for (const id of ids) {
    for (;;) {
      const body = JSON.stringify({ paymentIdentifier: id });
      const headers = signRequest({ keyId: setup.keyId, secret: setup.secret, method: 'POST', url, body });
      const response = await fetch(`${url}/api/public/v1/merchant-payments/status`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
      });
      if (((await response.json()) as { status: string }).status === 'paid') break;
      if (Date.now() > deadline) throw new Error(`payment ${id} was not paid in time`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return ids;
}

async function createOne(
  url: string,
  setup: { keyId: string; secret: string; terminalId: string },
  overrides: object = {},
): Promise<string> {
  const body = JSON.stringify({ ...paymentBody(setup.terminalId), ...overrides });
  const headers = signRequest({ keyId: setup.keyId, secret: setup.secret, method: 'POST', url, body });
  const response = await fetch(`${url}/api/public/v1/merchant-payments`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body,
  });
  const data = (await response.json()) as { paymentIdentifier: string };
  return data.paymentIdentifier;
}

/**
 * The floors as a table. With (c) measured, each floor plus the CPU the bare server spent on
 * one request of (c) (its HTTP, JSON and schema work) is the least a request of that
 * scenario can cost on the event loop, hence the most requests a second one thread can do.
 */
function printFloors(floors: Floor[], baseline: Row | undefined): void {
  const perRequest = baseline ? (baseline.cpu / baseline.rps) * 1e6 : undefined;
  const header = ['the durable writes alone (raw SQLite, 32 a commit)', 'µs', 'commit µs', 'WAL pages a commit'];
  if (baseline && perRequest) header.push(`+ (c)'s ${perRequest.toFixed(0)} µs: at most req/s`, 'vs (c)');
  const lines = floors.map((f) => {
    const cells = [f.name, f.micros.toFixed(1), f.commitMicros.toFixed(1), f.pagesPerCommit.toFixed(0)];
    if (baseline && perRequest) {
      const most = 1e6 / (f.micros + perRequest);
      cells.push(most.toFixed(0), `${((most / baseline.rps) * 100).toFixed(1)} %`);
    }
    return cells;
  });
  printTable('\n(f) Floors: the rows each request must write, and nothing else', header, lines);
}

function printTable(title: string, header: string[], lines: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? '').length)));
  const fmt = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  console.log(`${title}\n`);
  console.log(fmt(header));
  console.log(fmt(widths.map((w) => '-'.repeat(w))));
  for (const line of lines) console.log(fmt(line));
}

function print(rows: Row[]): void {
  const base = rows.find((r) => r.scenario.startsWith('(c)'))?.rps;
  const header = [
    'scenario',
    'req/s',
    'vs (c)',
    'p50 ms',
    'p99 ms',
    'errors',
    'non-2xx',
    'server CPU',
    'main thread',
    'load CPU',
    'peak RSS MiB',
    'RSS start→end MiB',
    'RSS max 1st→2nd half',
  ];
  const lines = rows.map((r) => [
    r.scenario,
    r.rps.toFixed(0),
    base ? `${((r.rps / base) * 100).toFixed(1)} %` : '—',
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    String(r.errors),
    String(r.non2xx),
    `${(r.cpu * 100).toFixed(0)} %`,
    `${(r.mainCpu * 100).toFixed(0)} %`,
    `${(r.loadCpu * 100).toFixed(0)} %`,
    r.peakMiB.toFixed(0),
    `${r.rssStart.toFixed(0)}→${r.rssEnd.toFixed(0)}`,
    `${r.rssHalves[0].toFixed(0)}→${r.rssHalves[1].toFixed(0)}`,
  ]);
  printTable(
    `\nLipa benchmark: ${POSTGRES ? 'PostgreSQL' : 'SQLite (WAL, synchronous=FULL)'}, ${CONNECTIONS} connections, ${SECONDS} s per scenario`,
    header,
    lines,
  );
}

await main();
