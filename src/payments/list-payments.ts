import type { Kysely } from 'kysely';
import type { AppContext } from '../context.js';
import { beyond } from '../db/keyset.js';
import type { Database, PaymentStatus, PaymentTable } from '../db/schema.js';
import type { SortKey } from '../http/pagination.js';

export interface PaymentFilter {
  status?: PaymentStatus | undefined;
  orderId?: string | undefined;
  /** How many rows to read: a page's limit + 1, to tell whether another page follows. */
  limit: number;
  /** The (created_at, id) of the last row of the previous page; absent for the first. */
  after?: SortKey | undefined;
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
 * all of that status. A page starts beyond the cursor's row, a range within the same index.
 */
export function paymentsQuery(db: Kysely<Database>, merchantId: string, filter: PaymentFilter) {
  let query = db.selectFrom('payments').selectAll();
  if (filter.after !== undefined) query = query.where(beyond('created_at', 'id', filter.after, 'desc'));
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
