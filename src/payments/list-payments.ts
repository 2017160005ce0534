import type { Kysely } from 'kysely';
import type { AppContext } from '../context.js';
import type { Database, PaymentStatus, PaymentTable } from '../db/schema.js';

export interface PaymentFilter {
  status?: PaymentStatus | undefined;
  orderId?: string | undefined;
  limit: number;
}

/** The merchant's own payments, newest first, with an exact status and orderId filter. */
export async function listPayments(ctx: AppContext, merchantId: string, filter: PaymentFilter): Promise<PaymentTable[]> {
  const rows = await paymentsQuery(ctx.store.db, merchantId, filter).execute();
  if (filter.orderId === undefined) return rows;
  // One payment per terminal at most has the order id: the status and the limit apply here.
  return rows.filter((p) => filter.status === undefined || p.status === filter.status).slice(0, filter.limit);
}

/**
 * The query, each filter within an index (exported for the test of its plans): a status in
 * payments_merchant_status; an order id in the unique (terminal_id, order_id) index, through
 * the merchant's terminals, which listPayments then filters. A terminal is one merchant's
 * (terminal ids are unique), so its payments are that merchant's. Given merchant_id or the
 * status as well, SQLite would walk an index on those instead, all the merchant's payments or
 * all of that status.
 */
export function paymentsQuery(db: Kysely<Database>, merchantId: string, filter: PaymentFilter) {
  const query = db.selectFrom('payments').selectAll();
  if (filter.orderId !== undefined)
    return query
      .where('order_id', '=', filter.orderId)
      .where('terminal_id', 'in', db.selectFrom('points_of_sale').select('terminal_id').where('merchant_id', '=', merchantId))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc');
  const own = query.where('merchant_id', '=', merchantId);
  return (filter.status === undefined ? own : own.where('status', '=', filter.status))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit);
}
