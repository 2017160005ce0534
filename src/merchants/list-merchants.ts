import type { AppContext } from '../context.js';
import { isoTime } from '../http/time.js';

/** Merchants, newest first (the operator API and CLI). */
export async function listMerchants(ctx: AppContext, limit: number) {
  const rows = await ctx.store.db
    .selectFrom('merchants')
    .select(['id', 'login', 'name', 'created_at', 'suspended_at'])
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map((m) => ({
    merchantId: m.id,
    login: m.login,
    name: m.name,
    createdAt: isoTime(m.created_at),
    suspendedAt: m.suspended_at === null ? null : isoTime(m.suspended_at),
  }));
}
