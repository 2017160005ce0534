import type { AppContext } from '../context.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Deletes expired sessions and nonces, old OTP challenges and stale throttle windows. Idempotent, so
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
