import type { AppContext } from '../context.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import { limitOf, type PageQuery } from '../http/pagination.js';
import { isoTime, isoTimeOrNull } from '../http/time.js';

const SCOPE = 'admin:merchants';

/** A page of the merchants, newest first (the operator API and CLI). */
export async function listMerchants(ctx: AppContext, query: PageQuery) {
  const limit = limitOf(query.limit);
  const after = startOf(ctx.cursors, SCOPE, query.cursor);
  let select = ctx.store.db.selectFrom('merchants').select(['id', 'login', 'name', 'created_at', 'suspended_at']);
  if (after !== undefined) select = select.where(beyond('created_at', 'id', after, 'desc'));
  const rows = await select
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute();
  return ctx.cursors.page(SCOPE, rows, limit, createdKey, (m) => ({
    merchantId: m.id,
    login: m.login,
    name: m.name,
    createdAt: isoTime(m.created_at),
    suspendedAt: isoTimeOrNull(m.suspended_at),
  }));
}
