import { sql } from 'kysely';
import { upgradeSecretHash } from '../auth/subjects.js';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { APPROVAL_CHECKS, type LanePlace, pepperOf, verifyPassword } from '../security/passwords.js';

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
 * Checks a payer's PIN before an approval. The verdict is given only once it is written: the
 * PIN is judged first, then the attempt and its outcome are recorded in one conditional
 * update that only an unlocked payer matches (a wrong PIN counts one; the 5th sets the lock
 * and starts the count again; a right PIN clears the count). A guess that finds the payer
 * locked by then learns nothing of its verdict, so however many run in parallel, on however
 * many instances, at most MAX_PIN_FAILURES wrong PINs are told per lock. A check cut short
 * (the service stopped while judging) wrote nothing and told nothing: it counts as nothing,
 * and no state is left half-written. The checks of one payer still run one at a time in a
 * process, so that parallel guesses do not each cost an scrypt while the lock falls.
 */
export function assertPin(ctx: AppContext, payerId: string, pin: string): Promise<void> {
  return oneAtATime(payerId, async () => {
    // A place in the approval lane, at the payer's turn (one payer's parallel tries hold at
    // most one place): refused (503 busy), nothing was read or written.
    const place = APPROVAL_CHECKS.admit();
    try {
      await checkPin(ctx, payerId, pin, place);
    } finally {
      place.done();
    }
  });
}

async function checkPin(ctx: AppContext, payerId: string, pin: string, place: LanePlace): Promise<void> {
  const payer = await ctx.store.db
    .selectFrom('payers')
    .select(['pin_hash', 'pin_locked_until'])
    .where('id', '=', payerId)
    .executeTakeFirstOrThrow();
  if (payer.pin_locked_until > ctx.now()) throw await locked(ctx, payerId);
  const right = await verifyPassword(pin, payer.pin_hash, place, pepperOf(ctx));
  const now = ctx.now();
  const lockUntil = now + PIN_LOCK_MS;
  const reachesLimit = sql<boolean>`pin_failures + 1 >= ${MAX_PIN_FAILURES}`;
  const recorded = await ctx.store.write((tx) =>
    tx
      .updateTable('payers')
      .set(
        right
          ? { pin_failures: 0 }
          : {
              pin_failures: sql`case when ${reachesLimit} then 0 else pin_failures + 1 end`,
              pin_locked_until: sql`case when ${reachesLimit} then ${lockUntil} else pin_locked_until end`,
            },
      )
      .where('id', '=', payerId)
      .where('pin_locked_until', '<=', now)
      .returning(['pin_failures', 'pin_locked_until'])
      .executeTakeFirst(),
  );
  // Locked meanwhile (by guesses judged alongside): no verdict, right or wrong.
  if (!recorded) throw await locked(ctx, payerId);
  if (right) return upgradeSecretHash(ctx, 'payer', payerId, pin, payer.pin_hash);
  if (recorded.pin_locked_until > now) throw new AppError('invalid_pin', 'Wrong PIN; approvals are now locked for 15 minutes.');
  const left = MAX_PIN_FAILURES - recorded.pin_failures;
  // The payer is warned before the lock, not only once it has fallen.
  throw new AppError('invalid_pin', `Wrong PIN; ${left} more wrong PIN${left === 1 ? '' : 's'} and approvals are locked for 15 minutes.`);
}

async function locked(ctx: AppContext, payerId: string): Promise<AppError> {
  const now = ctx.now();
  const payer = await ctx.store.db.selectFrom('payers').select('pin_locked_until').where('id', '=', payerId).executeTakeFirstOrThrow();
  const seconds = Math.max(1, Math.ceil((payer.pin_locked_until - now) / 1000));
  return new AppError('pin_locked', `Too many wrong PINs; approvals are locked for ${seconds} s.`, undefined, {
    'Retry-After': String(seconds),
  });
}
