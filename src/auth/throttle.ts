import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import { tooManyRequests } from '../http/rate-limit.js';

/**
 * Failed login and OTP attempts per login, in the database so that every instance sees
 * the same count: RATE_LIMIT_LOGIN_FAILURES per 15 minutes, then 429 until the window ends.
 */
const WINDOW_MS = 15 * 60 * 1000;

const keyOf = (login: string) => `login:${login}`;

export async function assertLoginNotThrottled(ctx: AppContext, login: string): Promise<void> {
  const row = await ctx.store.db.selectFrom('auth_throttle').selectAll().where('key', '=', keyOf(login)).executeTakeFirst();
  const now = ctx.now();
  if (row && now - row.window_start < WINDOW_MS && row.count >= ctx.config.rateLimitLoginFailures) {
    throw tooManyRequests(row.window_start + WINDOW_MS - now);
  }
}

export async function recordLoginFailure(ctx: AppContext, login: string): Promise<void> {
  const now = ctx.now();
  const stale = now - WINDOW_MS;
  await ctx.store.write((tx) =>
    tx
      .insertInto('auth_throttle')
      .values({ key: keyOf(login), window_start: now, count: 1 })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          count: sql`case when auth_throttle.window_start <= ${stale} then 1 else auth_throttle.count + 1 end`,
          window_start: sql`case when auth_throttle.window_start <= ${stale} then ${now} else auth_throttle.window_start end`,
        }),
      )
      .execute(),
  );
}

export async function clearLoginFailures(ctx: AppContext, login: string): Promise<void> {
  await ctx.store.write((tx) => tx.deleteFrom('auth_throttle').where('key', '=', keyOf(login)).execute());
}
