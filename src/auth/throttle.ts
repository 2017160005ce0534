import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import { tooManyRequests } from '../http/rate-limit.js';

/**
 * Login and OTP attempts per login, in the database so that every instance sees the same
 * count: RATE_LIMIT_LOGIN_FAILURES failed attempts per 15 minutes, then 429 until the window
 * ends. Each attempt is counted atomically before its password or OTP is checked (parallel
 * guesses cannot all slip under the limit); a right password is forgiven, a confirmed OTP
 * clears the count.
 */
const WINDOW_MS = 15 * 60 * 1000;

/**
 * What a count guards. `login`: the password or PIN and the code sent, on either listener (the
 * mock's endpoint 1 checks the real PIN, so its wrong PINs are real guesses). `mock-otp`: the
 * mock's endpoint 2, whose only good code is the published static one, so its failures guess
 * nothing: counted on their own, a load test's wrong codes cannot lock the payer out of the
 * main listener.
 */
export type Guarded = 'login' | 'mock-otp';

const keyOf = (login: string, guarded: Guarded) => `${guarded}:${login}`;

/** Counts one attempt; resolves to the start of the window it was counted in. */
export async function countLoginAttempt(ctx: AppContext, login: string, guarded: Guarded = 'login'): Promise<number> {
  const now = ctx.now();
  const stale = now - WINDOW_MS;
  const row = await ctx.store.write((tx) =>
    tx
      .insertInto('auth_throttle')
      .values({ key: keyOf(login, guarded), window_start: now, count: 1 })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          count: sql`case when auth_throttle.window_start <= ${stale} then 1 else auth_throttle.count + 1 end`,
          window_start: sql`case when auth_throttle.window_start <= ${stale} then ${now} else auth_throttle.window_start end`,
        }),
      )
      .returning(['count', 'window_start'])
      .executeTakeFirstOrThrow(),
  );
  if (row.count > ctx.config.rateLimitLoginFailures) throw tooManyRequests(row.window_start + WINDOW_MS - now);
  return Number(row.window_start);
}

/**
 * The attempt was not a failure (the password was right). With `countedIn` (countLoginAttempt's
 * window), only if the count is still that window's: one cleared since (a success) and begun
 * again holds others' attempts, not this one.
 */
export async function forgiveLoginAttempt(ctx: AppContext, login: string, countedIn?: number, guarded: Guarded = 'login'): Promise<void> {
  await ctx.store.write((tx) => {
    let forgive = tx
      .updateTable('auth_throttle')
      .set({ count: sql`count - 1` })
      .where('key', '=', keyOf(login, guarded))
      .where('count', '>', 0);
    if (countedIn !== undefined) forgive = forgive.where('window_start', '=', countedIn);
    return forgive.execute();
  });
}

export async function clearLoginFailures(ctx: AppContext, login: string): Promise<void> {
  await ctx.store.write((tx) => tx.deleteFrom('auth_throttle').where('key', '=', keyOf(login, 'login')).execute());
}
