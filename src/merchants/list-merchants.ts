import type { AppContext } from '../context.js';
import { isoTime, isoTimeOrNull } from '../http/time.js';

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
    suspendedAt: isoTimeOrNull(m.suspended_at),
  }));
}
