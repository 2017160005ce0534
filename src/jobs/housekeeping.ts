import type { AppContext } from '../context.js';

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Deletes expired sessions and nonces, old OTP challenges, stale throttle windows and
 * unclaimed early receipts. Idempotent, so
 * several instances on one PostgreSQL may all run it.
 */
export async function purgeExpired(ctx: AppContext): Promise<void> {
  const now = ctx.now();
  await ctx.store.write(async (tx) => {
    await tx.deleteFrom('sessions').where('expires_at', '<=', now).execute();
    await tx
      .deleteFrom('otp_challenges')
      .where('expires_at', '<=', now - DAY_MS)
      .execute();
    await tx
      .deleteFrom('auth_throttle')
      .where('window_start', '<=', now - DAY_MS)
      .execute();
    await tx.deleteFrom('nonces').where('expires_at', '<=', now).execute();
    // A receipt kept an hour for a submission that never came on record never will.
    await tx
      .deleteFrom('early_receipts')
      .where('received_at', '<=', now - HOUR_MS)
      .execute();
  });
}

/** Runs `task` every `intervalMs`, never overlapping itself; stop() waits for a running round. */
export function every(intervalMs: number, task: () => Promise<void>, onError: (error: unknown) => void) {
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = task()
      .catch(onError)
      .finally(() => {
        running = null;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
