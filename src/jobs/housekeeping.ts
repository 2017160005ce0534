import { sql } from 'kysely';
import type { AppContext } from '../context.js';

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/** Rows a purge deletes in one unit: a few milliseconds of SQLite, so requests wait little between units. */
export const PURGE_BATCH = 2000;

/**
 * Deletes expired sessions and nonces, old OTP challenges, stale throttle windows and
 * unclaimed early receipts. Idempotent, so several instances on one PostgreSQL may all run it.
 *
 * Each table is purged PURGE_BATCH rows a unit, each unit its own commit, yielding between
 * them: at 4,500 signed requests a second a minute leaves 270,000 nonces, and deleting them in
 * one unit held SQLite (and with it every request) for 1.7 s.
 */
export async function purgeExpired(ctx: AppContext, stopping?: AbortSignal): Promise<number> {
  const now = ctx.now();
  const purges: Array<[Purged, string, number]> = [
    ['sessions', 'expires_at', now],
    ['otp_challenges', 'expires_at', now - DAY_MS],
    ['auth_throttle', 'window_start', now - DAY_MS],
    ['nonces', 'expires_at', now],
    // A receipt kept an hour for a submission that never came on record never will.
    ['early_receipts', 'received_at', now - HOUR_MS],
  ];
  let deleted = 0;
  for (const [table, column, upTo] of purges) {
    deleted += await purge(ctx, table, column, upTo, stopping);
    if (stopping?.aborted) break;
  }
  return deleted;
}

type Purged = 'sessions' | 'otp_challenges' | 'auth_throttle' | 'nonces' | 'early_receipts';

/**
 * Deletes the rows of `table` whose `column` is at most `upTo`, PURGE_BATCH a unit; how many.
 * Stopping, it ends after the unit under way: the next start purges the rest.
 */
async function purge(ctx: AppContext, table: Purged, column: string, upTo: number, stopping?: AbortSignal): Promise<number> {
  // The row's physical address, which both databases look up directly.
  const row = sql.raw(ctx.store.dialect === 'postgres' ? 'ctid' : 'rowid');
  let total = 0;
  for (;;) {
    const result = await ctx.store.write((tx) =>
      sql`delete from ${sql.table(table)} where ${row} in (select ${row} from ${sql.table(table)} where ${sql.ref(column)} <= ${upTo} limit ${PURGE_BATCH})`.execute(
        tx,
      ),
    );
    const deleted = Number(result.numAffectedRows ?? 0n);
    total += deleted;
    if (deleted < PURGE_BATCH || stopping?.aborted) return total;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Runs `task` every `intervalMs`, never overlapping itself; stop() waits for a running round,
 * after telling it through `stopping` (a long round may end early and leave the rest for later).
 */
export function every(intervalMs: number, task: (stopping: AbortSignal) => Promise<void>, onError: (error: unknown) => void) {
  let running: Promise<void> | null = null;
  const stopping = new AbortController();
  const timer = setInterval(() => {
    if (running) return;
    running = task(stopping.signal)
      .catch(onError)
      .finally(() => {
        running = null;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}
