import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { verifyPassword } from '../security/passwords.js';

/** After this many wrong PINs in a row, approving payments is locked for PIN_LOCK_MS. */
export const MAX_PIN_FAILURES = 5;
export const PIN_LOCK_MS = 15 * 60 * 1000;

/** Checks a payer's PIN before an approval; wrong PINs count towards a lock. */
export async function assertPin(ctx: AppContext, payerId: string, pin: string): Promise<void> {
  const payer = await ctx.store.db
    .selectFrom('payers')
    .select(['pin_hash', 'pin_failures', 'pin_locked_until'])
    .where('id', '=', payerId)
    .executeTakeFirstOrThrow();
  const now = ctx.now();
  if (payer.pin_locked_until > now) {
    const seconds = Math.ceil((payer.pin_locked_until - now) / 1000);
    throw new AppError('pin_locked', `Too many wrong PINs; approvals are locked for ${seconds} s.`, undefined, {
      'Retry-After': String(seconds),
    });
  }
  if (await verifyPassword(pin, payer.pin_hash)) {
    if (payer.pin_failures > 0)
      await ctx.store.write((tx) => tx.updateTable('payers').set({ pin_failures: 0 }).where('id', '=', payerId).execute());
    return;
  }
  const failures = payer.pin_failures + 1;
  const locked = failures >= MAX_PIN_FAILURES;
  await ctx.store.write((tx) =>
    tx
      .updateTable('payers')
      .set(locked ? { pin_failures: 0, pin_locked_until: now + PIN_LOCK_MS } : { pin_failures: failures })
      .where('id', '=', payerId)
      .execute(),
  );
  throw new AppError('invalid_pin', locked ? 'Wrong PIN; approvals are now locked for 15 minutes.' : 'Wrong PIN.');
}
