import type { AppContext } from '../context.js';
import type { PaymentStatus, PaymentTable } from '../db/schema.js';

export interface PaymentFilter {
  status?: PaymentStatus | undefined;
  orderId?: string | undefined;
  limit: number;
}

/** The merchant's own payments, newest first, with an exact status and orderId filter. */
export async function listPayments(ctx: AppContext, merchantId: string, filter: PaymentFilter): Promise<PaymentTable[]> {
  let query = ctx.store.db.selectFrom('payments').selectAll().where('merchant_id', '=', merchantId);
  if (filter.status !== undefined) query = query.where('status', '=', filter.status);
  if (filter.orderId !== undefined) query = query.where('order_id', '=', filter.orderId);
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute();
}
