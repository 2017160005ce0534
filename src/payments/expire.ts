import type { AppContext } from '../context.js';
import { movePayment } from './transitions.js';

/**
 * Expires pending and no_user payments past their expiry time: the sweep, every half
 * second, and a list about to be read (`of` one merchant or one payer), so that no answer
 * shows a payment pending after its expiry, even right after a restart. Each is a conditional move,
 * so with several instances sweeping one PostgreSQL each payment expires exactly once.
 */
export async function expireDuePayments(ctx: AppContext, of: { merchantId: string } | { payerId: string } | null = null): Promise<number> {
  const now = ctx.now();
  let query = ctx.store.db.selectFrom('payments').select('id').where('status', 'in', ['pending', 'no_user']).where('expires_at', '<=', now);
  if (of && 'merchantId' in of) query = query.where('merchant_id', '=', of.merchantId);
  if (of && 'payerId' in of) query = query.where('payer_id', '=', of.payerId);
  const due = await query.limit(500).execute();
  if (due.length === 0) return 0;
  const moved = await Promise.all(due.map(({ id }) => ctx.store.write((tx) => movePayment(tx, id, { to: 'expired' }, now))));
  return moved.filter(Boolean).length;
}
