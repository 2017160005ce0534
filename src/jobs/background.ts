import { deliverDueCallbacks, stopCallbacks } from '../callbacks/worker.js';
import type { AppContext } from '../context.js';
import { expireDuePayments } from '../payments/expire.js';
import { answerForTestPayers, ensureStagingPayers } from '../wallet/staging-payers.js';
import { every, purgeExpired } from './housekeeping.js';

/**
 * Everything the service does on its own, started once per process: callback delivery,
 * payment expiry, the staging test payers, and housekeeping. Every task is safe to run on
 * several instances at once. stop() waits for running rounds (used on SIGTERM).
 * `expirySweep: false` (tests only) leaves expiry to reads, which see a due payment as expired.
 */
export async function startBackground(ctx: AppContext, options: { expirySweep?: boolean } = {}): Promise<{ stop(): Promise<void> }> {
  if (ctx.config.env === 'staging') await ensureStagingPayers(ctx);
  const onError = (task: string) => (err: unknown) => ctx.log.error({ err, task }, 'background task failed');
  const tasks = [
    every(250, async () => void (await deliverDueCallbacks(ctx)), onError('callbacks')),
    every(100, async () => void (await ctx.messenger.deliverDue()), onError('messages')),
    every(1000, async () => void (await ctx.messenger.matchEarlyReceipts()), onError('early receipts')),
    every(60_000, async (stopping) => void (await purgeExpired(ctx, stopping)), onError('housekeeping')),
  ];
  if (options.expirySweep !== false) tasks.push(every(500, async () => void (await expireDuePayments(ctx)), onError('expiry')));
  if (ctx.config.env === 'staging') tasks.push(every(250, () => answerForTestPayers(ctx), onError('test payers')));
  return {
    async stop() {
      await Promise.all(tasks.map((t) => t.stop()));
      // Callbacks on the wire finish and are recorded before the database closes.
      await stopCallbacks(ctx);
    },
  };
}
