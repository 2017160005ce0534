import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { verifyPassword } from '../security/passwords.js';

/** After this many wrong PINs in a row, approving payments is locked for PIN_LOCK_MS. */
export const MAX_PIN_FAILURES = 5;
export const PIN_LOCK_MS = 15 * 60 * 1000;

/** PIN checks of one payer run one at a time in this process (see assertPin). */
const queues = new Map<string, Promise<unknown>>();

function oneAtATime<T>(key: string, task: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve();
  const next = previous.catch(() => undefined).then(task);
  queues.set(key, next);
  void next
    .finally(() => {
      if (queues.get(key) === next) queues.delete(key);
    })
    .catch(() => undefined);
  return next;
}

/**
 * Checks a payer's PIN before an approval. Parallel guesses cannot slip past the lock: the
 * checks of one payer run one at a time in a process, and each attempt is counted in the
 * database (atomically) before the PIN is checked, so across instances too at most a few
 * more than MAX_PIN_FAILURES wrong PINs are ever checked; then approvals are locked for
 * PIN_LOCK_MS. A right PIN resets the count.
 */
export function assertPin(ctx: AppContext, payerId: string, pin: string): Promise<void> {
  return oneAtATime(payerId, () => checkPin(ctx, payerId, pin));
}

async function checkPin(ctx: AppContext, payerId: string, pin: string): Promise<void> {
  const now = ctx.now();
  const attempt = await ctx.store.write(async (tx) => {
    const counted = await tx
      .updateTable('payers')
      .set({ pin_failures: sql`pin_failures + 1` })
      .where('id', '=', payerId)
      .where('pin_locked_until', '<=', now)
      .returning(['pin_failures', 'pin_hash'])
      .executeTakeFirst();
    // More attempts counted than judged: checks whose outcome was never written (the service
    // stopped between counting and judging, or another instance's are under way). They count
    // as wrong PINs, and lock approvals like them, for PIN_LOCK_MS, after which the count
    // starts again. Without the lock's end the payer would be refused forever.
    if (counted && counted.pin_failures > MAX_PIN_FAILURES)
      await tx
        .updateTable('payers')
        .set({ pin_failures: 0, pin_locked_until: now + PIN_LOCK_MS })
        .where('id', '=', payerId)
        .execute();
    return counted;
  });
  if (!attempt || attempt.pin_failures > MAX_PIN_FAILURES) throw await locked(ctx, payerId, now);
  if (await verifyPassword(pin, attempt.pin_hash)) {
    await ctx.store.write((tx) => tx.updateTable('payers').set({ pin_failures: 0 }).where('id', '=', payerId).execute());
    return;
  }
  if (attempt.pin_failures >= MAX_PIN_FAILURES) {
    await ctx.store.write((tx) =>
      tx
        .updateTable('payers')
        .set({ pin_failures: 0, pin_locked_until: now + PIN_LOCK_MS })
        .where('id', '=', payerId)
        .execute(),
    );
    throw new AppError('invalid_pin', 'Wrong PIN; approvals are now locked for 15 minutes.');
  }
  const left = MAX_PIN_FAILURES - attempt.pin_failures;
  // The payer is warned before the lock, not only once it has fallen.
  throw new AppError('invalid_pin', `Wrong PIN; ${left} more wrong PIN${left === 1 ? '' : 's'} and approvals are locked for 15 minutes.`);
}

async function locked(ctx: AppContext, payerId: string, now: number): Promise<AppError> {
  const payer = await ctx.store.db.selectFrom('payers').select('pin_locked_until').where('id', '=', payerId).executeTakeFirstOrThrow();
  const seconds = Math.max(1, Math.ceil((payer.pin_locked_until - now) / 1000));
  return new AppError('pin_locked', `Too many wrong PINs; approvals are locked for ${seconds} s.`, undefined, {
    'Retry-After': String(seconds),
  });
}
