import type { AppContext } from '../context.js';
import { lockedReadNoKey, type Tx } from '../db/database.js';
import { AppError, shown } from '../http/errors.js';
import { isoTimeOrNull } from '../http/time.js';
import { countMessageStatus } from '../ops/counters.js';

/** Why a suspended merchant's queued messages were not sent, as the lookup's `error` says it. */
export const SUSPENDED_MESSAGE = 'Not sent: the merchant account was suspended.';

/**
 * The operator suspends a merchant (fraud, a dispute, a closed business) and may reinstate it.
 * Suspending, in one unit:
 * - marks the merchant suspended: endpoint 1 refuses its right password with `403
 *   account_suspended` (a wrong one stays the usual 401, so strangers learn nothing);
 * - revokes every key it holds: its signed requests are `403 unknown_key`, its messages `401`;
 * - ends every session it has, and uses up any login code not yet confirmed, so that a sign-in
 *   under way when it is suspended cannot open a session after.
 * - fails its messages still queued (not those on the wire at that moment).
 * Every unit that opens a session, issues a login code or makes a key reads the mark locked
 * (assertNotSuspended), so that whichever commits second sees the other: nothing of the
 * merchant's outlives its suspension. Requests already past those points finish.
 * Its payments stay as they are: pending ones can still be paid or expire, their callbacks
 * still go out. Reinstating only lifts the mark: the merchant signs in and makes new keys.
 */
export async function suspendMerchant(ctx: AppContext, merchantId: string) {
  const now = ctx.now();
  await ctx.store.write(async (tx) => {
    const merchant = await tx.selectFrom('merchants').select('login').where('id', '=', merchantId).executeTakeFirst();
    if (!merchant) return;
    // The merchant's row first: every unit that reads the mark locks it first too (no deadlock).
    await tx.updateTable('merchants').set({ suspended_at: now }).where('id', '=', merchantId).where('suspended_at', 'is', null).execute();
    // The login codes first: a confirmation under way holds its code's row (confirm.ts) and has
    // opened its session by the time this update gets the row, so the delete below sees it.
    await tx
      .updateTable('otp_challenges')
      .set({ consumed_at: now })
      .where('login', '=', merchant.login)
      .where('consumed_at', 'is', null)
      .execute();
    await tx.deleteFrom('sessions').where('subject_type', '=', 'merchant').where('subject_id', '=', merchantId).execute();
    for (const table of ['api_keys', 'messaging_keys'] as const) {
      await tx.updateTable(table).set({ revoked_at: now }).where('merchant_id', '=', merchantId).where('revoked_at', 'is', null).execute();
    }
    const failed = await tx
      .updateTable('messages')
      .set({ status: 'failed', last_error: SUSPENDED_MESSAGE, failure_reason: SUSPENDED_MESSAGE, updated_at: now })
      .where('merchant_id', '=', merchantId)
      .where('status', '=', 'queued')
      .where('locked_until', '<=', now)
      .returning('type')
      .execute();
    for (const { type } of failed) countMessageStatus(tx, type, 'failed');
  });
  return merchantView(ctx, merchantId);
}

export async function reinstateMerchant(ctx: AppContext, merchantId: string) {
  await ctx.store.write((tx) => tx.updateTable('merchants').set({ suspended_at: null }).where('id', '=', merchantId).execute());
  return merchantView(ctx, merchantId);
}

async function merchantView(ctx: AppContext, merchantId: string) {
  const merchant = await ctx.store.db
    .selectFrom('merchants')
    .select(['id', 'login', 'name', 'suspended_at'])
    .where('id', '=', merchantId)
    .executeTakeFirst();
  if (!merchant) throw new AppError('not_found', `No merchant ${shown(merchantId)}.`);
  return {
    merchantId: merchant.id,
    login: merchant.login,
    name: merchant.name,
    suspendedAt: isoTimeOrNull(merchant.suspended_at),
  };
}

/**
 * Refuses (403 account_suspended) when the merchant is suspended, read in the caller's unit
 * with the merchant's row locked on PostgreSQL: a suspension committing meanwhile is waited
 * for and seen, or waits for this unit and then undoes what it made.
 */
export async function assertNotSuspended(ctx: AppContext, tx: Tx, merchantId: string): Promise<void> {
  const merchant = await lockedReadNoKey(
    ctx.store.dialect,
    tx.selectFrom('merchants').select('suspended_at').where('id', '=', merchantId),
  ).executeTakeFirst();
  if (merchant?.suspended_at != null) throw accountSuspended();
}

export const accountSuspended = () =>
  new AppError('account_suspended', 'This merchant account is suspended: ask the operator. Nothing was done.');
