import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import type { Database } from '../db/schema.js';
import type { App } from '../http/types.js';
import { counterLines } from './counters.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

interface Series {
  /** The series' labels, escaped for the text format. */
  labels: string;
  count: number;
  sum: number;
  buckets: number[];
}

const label = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** Each service's request series, shared by its listeners (the main one and the mock environment's). */
const seriesOf = new WeakMap<AppContext, Map<string, Series>>();

function requestSeries(ctx: AppContext): Map<string, Series> {
  let series = seriesOf.get(ctx);
  if (!series) {
    series = new Map();
    seriesOf.set(ctx, series);
  }
  return series;
}

/**
 * Counts every request of `app` and its duration per route pattern (never per raw URL, so
 * ids do not explode the series), labelled with the listener: the mock environment's
 * listener, made for load tests of the login path, shows in the main listener's /metrics.
 */
export function countRequests(app: App, ctx: AppContext, listener: 'main' | 'mock'): void {
  const series = requestSeries(ctx);
  // Runs for every request: a callback hook (no promise), labels escaped once per series.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const key = `${listener} ${request.method} ${reply.statusCode} ${route}`;
    let s = series.get(key);
    if (!s) {
      const labels = `method="${label(request.method)}",route="${label(route)}",status="${reply.statusCode}",listener="${listener}"`;
      s = { labels, count: 0, sum: 0, buckets: BUCKETS.map(() => 0) };
      series.set(key, s);
    }
    const seconds = reply.elapsedTime / 1000;
    s.count++;
    s.sum += seconds;
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= (BUCKETS[i] ?? 0)) s.buckets[i] = (s.buckets[i] ?? 0) + 1;
    done();
  });
}

/**
 * The gauges' queries: each counts only rows in a state that is left again (a payment waiting
 * for its payer, a message or a callback waiting to go), within an index on that state, so the
 * count stays small however many payments and messages there have been. Exported for the test
 * that checks their query plans.
 */
export const OPEN_WORK = {
  payments: (db: Kysely<Database>) =>
    db
      .selectFrom('payments')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', ['pending', 'no_user'])
      .groupBy('status'),
  messages: (db: Kysely<Database>) =>
    db
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'queued'),
  callbacks: (db: Kysely<Database>) =>
    db
      .selectFrom('callback_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'pending'),
};

/**
 * GET /metrics in the Prometheus text format: requests and their durations per route
 * pattern and listener, what this instance moved (payments and messages by status, ops/counters.ts),
 * the work still open (payments, messages and callbacks waiting), and process memory.
 */
export function registerMetrics(app: App, ctx: AppContext): void {
  const series = requestSeries(ctx);
  countRequests(app, ctx, 'main');

  app.get(
    '/metrics',
    {
      schema: { tags: ['Operations'], summary: 'Prometheus metrics' },
      // For the description only: the answer is the Prometheus text format, not JSON.
      config: {
        responseDocs: {
          200: Type.Unsafe({
            description: 'The metrics',
            content: { 'text/plain; version=0.0.4': { schema: { type: 'string', description: 'Prometheus text exposition format' } } },
          }),
        },
      },
    },
    async (_request, reply) => {
      const lines: string[] = [];
      lines.push(
        '# HELP lipa_http_requests_total HTTP requests by method, route pattern, status and listener.',
        '# TYPE lipa_http_requests_total counter',
      );
      for (const { labels, count } of series.values()) lines.push(`lipa_http_requests_total{${labels}} ${count}`);
      lines.push('# HELP lipa_http_request_duration_seconds HTTP request duration.', '# TYPE lipa_http_request_duration_seconds histogram');
      for (const s of series.values()) {
        const key = s.labels;
        BUCKETS.forEach((bound, i) => {
          lines.push(`lipa_http_request_duration_seconds_bucket{${key},le="${bound}"} ${s.buckets[i]}`);
        });
        lines.push(`lipa_http_request_duration_seconds_bucket{${key},le="+Inf"} ${s.count}`);
        lines.push(
          `lipa_http_request_duration_seconds_sum{${key}} ${s.sum}`,
          `lipa_http_request_duration_seconds_count{${key}} ${s.count}`,
        );
      }
      lines.push(...counterLines());
      // The work still open, counted in an index (OPEN_WORK): never a scan of every row.
      const db = ctx.store.db;
      const open = new Map((await OPEN_WORK.payments(db).execute()).map((p) => [p.status, Number(p.n)]));
      lines.push(
        '# HELP lipa_payments_open Payments waiting for their payer (pending) or for the payer to register (no_user).',
        '# TYPE lipa_payments_open gauge',
      );
      for (const status of ['pending', 'no_user'] as const) lines.push(`lipa_payments_open{status="${status}"} ${open.get(status) ?? 0}`);
      const queued = await OPEN_WORK.messages(db).executeTakeFirst();
      lines.push('# HELP lipa_messages_queued Messages waiting to be sent or tried again.', '# TYPE lipa_messages_queued gauge');
      lines.push(`lipa_messages_queued ${Number(queued?.n ?? 0)}`);
      const pending = await OPEN_WORK.callbacks(db).executeTakeFirst();
      lines.push(
        '# HELP lipa_callback_deliveries_pending Callback deliveries waiting to be sent or retried.',
        '# TYPE lipa_callback_deliveries_pending gauge',
      );
      lines.push(`lipa_callback_deliveries_pending ${Number(pending?.n ?? 0)}`);
      const binds = ctx.messenger.transports.sms?.binds?.();
      if (binds) {
        lines.push('# HELP lipa_smpp_bound Whether each SMPP bind of this instance is up (1) or not (0).', '# TYPE lipa_smpp_bound gauge');
        for (const [bind, up] of Object.entries(binds)) lines.push(`lipa_smpp_bound{bind="${bind}"} ${up ? 1 : 0}`);
      }
      const memory = process.memoryUsage();
      lines.push('# TYPE process_resident_memory_bytes gauge', `process_resident_memory_bytes ${memory.rss}`);
      lines.push('# TYPE nodejs_heap_used_bytes gauge', `nodejs_heap_used_bytes ${memory.heapUsed}`);
      return reply.type('text/plain; version=0.0.4; charset=utf-8').send(`${lines.join('\n')}\n`);
    },
  );
}
