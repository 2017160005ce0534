import type { AppContext } from '../context.js';
import { movePayment } from './transitions.js';

/**
 * Expires pending and no_user payments past their expiry time. Each is a conditional move,
 * so with several instances sweeping one PostgreSQL each payment expires exactly once.
 */
export async function expireDuePayments(ctx: AppContext): Promise<number> {
  const now = ctx.now();
  const due = await ctx.store.db
    .selectFrom('payments')
    .select('id')
    .where('status', 'in', ['pending', 'no_user'])
    .where('expires_at', '<=', now)
    .limit(500)
    .execute();
  const moved = await Promise.all(due.map(({ id }) => ctx.store.write((tx) => movePayment(tx, id, { to: 'expired' }, now))));
  return moved.filter(Boolean).length;
}
