import type { Selectable } from 'kysely';
import { signRequest } from '../client/signing.js';
import type { AppContext } from '../context.js';
import { claimingRead, lockedRead } from '../db/database.js';
import { OutageRecorder } from '../db/record-retry.js';
import type { CallbackDeliveryTable } from '../db/schema.js';
import { backoffMs } from '../jobs/backoff.js';
import { randomId } from '../security/tokens.js';
import { type CallbackResult, postCallback } from './transport.js';

/**
 * CONTRACT §1 and §7: the first retry after CALLBACK_RETRY_BASE_SECONDS, each next wait double
 * the one before (capped), about 12 tries over 24 h. Doubling from 30 s, 12 tries would end
 * after 17 h; the first try and 12 retries, the waits capped at 8 h, end after 24.5 h
 * (30 s × (2¹⁰ − 1) + 2 × 8 h).
 */
export const MAX_ATTEMPTS = 13;
export const MAX_DELAY_MS = 8 * 60 * 60 * 1000;
/** ±10 %: enough to spread retries of failures that came together, and each wait stays about double the last. */
export const RETRY_JITTER = 0.1;
const TIMEOUT_MS = 10_000;
/** A claimed delivery is leased (longer than one attempt can take); if the worker dies, another takes it after this. */
const LEASE_MS = 20_000;
/** The record of a lease's attempt whose outcome had not come when the lease ran out. */
const unfinishedId = (deliveryId: string, leasedUntil: number) => `att_unfinished_${deliveryId}_${leasedUntil}`;

/** The error of an attempt that was never recorded (see deliverDueCallbacks). */
export const UNFINISHED =
  'no outcome recorded: the instance sending it stopped, or lost the database, during the attempt (it may have arrived)';
/** At most this many callbacks in flight per service; a slow receiver holds up only its own. */
export const MAX_IN_FLIGHT = 64;

/** One service's deliveries under way (several services may share a process: tests do). */
interface Worker {
  inFlight: number;
  running: Set<Promise<void>>;
  /** Records attempts through a database outage; the deliveries it holds are not claimed again here meanwhile. */
  recorder: OutageRecorder;
}
const workers = new WeakMap<AppContext, Worker>();

function workerOf(ctx: AppContext): Worker {
  let worker = workers.get(ctx);
  if (worker === undefined) {
    worker = { inFlight: 0, running: new Set(), recorder: new OutageRecorder(ctx.log, 'callback attempts') };
    workers.set(ctx, worker);
  }
  return worker;
}

/** Resolves when the attempts on the wire are done and recorded, as far as the database lets it (used on shutdown). */
export async function stopCallbacks(ctx: AppContext): Promise<void> {
  const worker = workerOf(ctx);
  worker.recorder.stop();
  await Promise.allSettled([...worker.running]);
}

/**
 * Delivers due callbacks: claims them with a lease (conditional update, so two instances
 * never send the same attempt), signs each with the key that created the payment, sends it,
 * and records the attempt. Delivery is at least once; the eventId is the same every time.
 * `leaseMs`: tests shorten it.
 */
export async function deliverDueCallbacks(ctx: AppContext, leaseMs = LEASE_MS): Promise<number> {
  const worker = workerOf(ctx);
  const room = MAX_IN_FLIGHT - worker.inFlight;
  if (room <= 0) return 0;
  const now = ctx.now();
  const claimed = await ctx.store.write(async (tx) => {
    // Locked as read on PostgreSQL: the lease that ran out (locked_until) is the one this
    // claim ends, not one another instance has since taken, used and released.
    const due = await claimingRead(
      ctx.store.dialect,
      tx
        .selectFrom('callback_deliveries')
        .select(['id', 'locked_until'])
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .where('locked_until', '<=', now)
        .$if(worker.recorder.waiting.size > 0, (query) => query.where('id', 'not in', [...worker.recorder.waiting]))
        .orderBy('next_attempt_at')
        .limit(room),
    ).execute();
    if (due.length === 0) return [];
    const claimed = await tx
      .updateTable('callback_deliveries')
      .set({ locked_until: now + leaseMs })
      .where(
        'id',
        'in',
        due.map((d) => d.id),
      )
      .where('locked_until', '<=', now)
      .where('next_attempt_at', '<=', now)
      .where('status', '=', 'pending')
      .returningAll()
      .execute();
    // A lease that ran out without being released is an attempt whose outcome was never
    // recorded (its instance stopped mid-send): it may have arrived, so it goes on the record.
    const unfinished = new Map(due.filter((d) => d.locked_until > 0).map((d) => [d.id, d.locked_until]));
    for (const delivery of claimed) {
      const leasedUntil = unfinished.get(delivery.id);
      if (leasedUntil === undefined) continue;
      await tx
        .insertInto('callback_attempts')
        .values({
          id: unfinishedId(delivery.id, leasedUntil),
          delivery_id: delivery.id,
          attempted_at: leasedUntil - leaseMs,
          status_code: null,
          error: UNFINISHED,
          duration_ms: 0,
        })
        .execute();
      delivery.attempts += 1;
      delivery.last_error = UNFINISHED;
      await tx
        .updateTable('callback_deliveries')
        .set({ attempts: delivery.attempts, last_error: UNFINISHED })
        .where('id', '=', delivery.id)
        .execute();
    }
    return claimed;
  });
  // Not awaited: the next round claims what is due while these are on the wire.
  for (const delivery of claimed) {
    worker.inFlight++;
    const sending = attempt(ctx, worker, delivery).finally(() => {
      worker.inFlight--;
      worker.running.delete(sending);
    });
    worker.running.add(sending);
  }
  return claimed.length;
}

/** One attempt, always recorded: a failure on our side (e.g. an unreadable key) counts as a failed try. */
async function attempt(ctx: AppContext, worker: Worker, delivery: Selectable<CallbackDeliveryTable>): Promise<void> {
  let result: CallbackResult;
  try {
    result = await send(ctx, delivery);
  } catch (err) {
    ctx.log.error({ err, deliveryId: delivery.id }, 'callback attempt could not be made');
    result = { statusCode: null, error: `internal error: ${(err as Error).message}`, durationMs: 0 };
  }
  // The receiver has answered: a database outage now must not lose that (the lease would run
  // out and the callback be sent again), so the record is tried until the database is back,
  // and this process leaves the delivery alone meanwhile (another instance may not, once the
  // database is back, if the outage outlasted the lease).
  const attempted = { id: randomId('att_'), finishedAt: ctx.now() };
  await worker.recorder
    .record(delivery.id, (tries) => record(ctx, delivery, result, attempted, tries > 0))
    .catch((err: unknown) => ctx.log.error({ err, deliveryId: delivery.id }, 'callback attempt not recorded'));
}

async function send(ctx: AppContext, delivery: Selectable<CallbackDeliveryTable>): Promise<CallbackResult> {
  const event = await ctx.store.db
    .selectFrom('callback_events as e')
    .innerJoin('api_keys as k', 'k.id', 'e.api_key_id')
    .innerJoin('points_of_sale as s', 's.id', 'e.pos_id')
    .select(['e.payload', 'e.api_key_id', 'k.secret_enc', 's.trust_all_certificates'])
    .where('e.id', '=', delivery.event_id)
    .executeTakeFirstOrThrow();
  const secret = ctx.secretBox.open(event.secret_enc, event.api_key_id);
  const insecureTls = event.trust_all_certificates === 1 && ctx.config.callbackAllowInsecureTls;
  if (insecureTls && ctx.config.env === 'production') {
    ctx.log.warn({ deliveryId: delivery.id }, 'callback TLS certificate not verified (trustAllCertificates)');
  }
  const headers = signRequest({
    keyId: event.api_key_id,
    secret,
    method: 'POST',
    url: delivery.url,
    body: event.payload,
    origin: new URL(delivery.url).origin,
  });
  return postCallback({
    url: delivery.url,
    body: event.payload,
    headers,
    insecureTls,
    allowPrivate: ctx.config.callbackAllowPrivate,
    dnsServers: ctx.config.callbackDnsServers,
    timeoutMs: TIMEOUT_MS,
  });
}

/**
 * Records an attempt (its id chosen once, and when its outcome came), once: tried `again`
 * after a commit whose answer was lost, it finds itself there.
 */
async function record(
  ctx: AppContext,
  delivery: Selectable<CallbackDeliveryTable>,
  result: CallbackResult,
  attempted: { id: string; finishedAt: number },
  again: boolean,
): Promise<void> {
  const ok = result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
  const error = ok ? null : (result.error ?? `HTTP ${result.statusCode}`);
  const now = ctx.now();
  const attempts = await ctx.store.write(async (tx) => {
    if (again && (await tx.selectFrom('callback_attempts').select('id').where('id', '=', attempted.id).executeTakeFirst())) return null;
    // Locked until the commit on PostgreSQL: a redelivery asked for meanwhile waits, and then
    // sees this attempt recorded, rather than being overwritten by it.
    const current = await lockedRead(
      ctx.store.dialect,
      tx.selectFrom('callback_deliveries').select(['attempts', 'redeliver_requested', 'locked_until']).where('id', '=', delivery.id),
    ).executeTakeFirstOrThrow();
    await tx
      .insertInto('callback_attempts')
      .values({
        id: attempted.id,
        delivery_id: delivery.id,
        // When the attempt started: the request went out durationMs before its outcome.
        attempted_at: attempted.finishedAt - result.durationMs,
        status_code: result.statusCode,
        error,
        duration_ms: result.durationMs,
      })
      .execute();
    // The lease ran out and another worker has the delivery now: this attempt's outcome
    // replaces the "no outcome" record they made of it (and counted), but the delivery's
    // state is theirs to set.
    if (current.locked_until !== delivery.locked_until) {
      await tx.deleteFrom('callback_attempts').where('id', '=', unfinishedId(delivery.id, delivery.locked_until)).execute();
      return current.attempts;
    }
    const made = current.attempts + 1;
    // A redelivery asked for while this attempt was on the wire: one more try, now.
    const redeliver = current.redeliver_requested === 1;
    await tx
      .updateTable('callback_deliveries')
      .set({
        attempts: made,
        status: redeliver ? 'pending' : ok ? 'delivered' : made >= MAX_ATTEMPTS ? 'failed' : 'pending',
        next_attempt_at:
          redeliver || ok ? now : now + backoffMs(ctx.config.callbackRetryBaseSeconds * 1000, made, MAX_DELAY_MS, RETRY_JITTER),
        locked_until: 0,
        redeliver_requested: 0,
        last_error: error,
        updated_at: now,
      })
      .where('id', '=', delivery.id)
      .execute();
    return made;
  });
  if (!ok && attempts !== null)
    ctx.log.info({ deliveryId: delivery.id, eventId: delivery.event_id, attempts, error }, 'callback attempt failed');
}
