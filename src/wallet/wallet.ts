import type { Kysely } from 'kysely';
import type { AppContext } from '../context.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import type { Database, PaymentStatus } from '../db/schema.js';
import { limitOf, type PageQuery, type SortKey } from '../http/pagination.js';
import { isoTime } from '../http/time.js';
import { accountId, balanceOf } from '../ledger/ledger.js';
import { CURRENCY, fromMinorUnits } from '../ledger/money.js';
import { expireDuePayments } from '../payments/expire.js';

/** The payer's wallet: phone and balance (GET /api/v1/wallet). */
export async function walletOf(ctx: AppContext, payerId: string) {
  const payer = await ctx.store.db.selectFrom('payers').select('phone').where('id', '=', payerId).executeTakeFirstOrThrow();
  return {
    phone: payer.phone,
    balance: fromMinorUnits((await balanceOf(ctx.store.db, accountId('wallet', payerId))) ?? 0),
    currency: CURRENCY,
  };
}

/**
 * A page of the payer's payments, newest first, optionally of one status. Those past their
 * expiry are expired first, so that none shows as waiting that can no longer be paid.
 */
export async function listWalletPayments(ctx: AppContext, payerId: string, query: PageQuery & { status?: PaymentStatus | undefined }) {
  const scope = `wallet:${payerId}`;
  const limit = limitOf(query.limit);
  const after = startOf(ctx.cursors, scope, query.cursor);
  await expireDuePayments(ctx, { payerId });
  const rows = await walletPaymentsQuery(ctx.store.db, payerId, query.status, limit + 1, after).execute();
  return ctx.cursors.page(scope, rows, limit, createdKey, (p) => ({
    paymentIdentifier: p.id,
    status: p.status,
    ...(p.status === 'declined' && p.reason ? { reason: p.reason } : {}),
    merchantName: p.pos_company_name,
    orderId: p.order_id,
    description: p.description,
    amount: fromMinorUnits(p.amount),
    refundedAmount: fromMinorUnits(p.refunded_amount),
    currency: p.currency,
    createdAt: isoTime(p.created_at),
    updatedAt: isoTime(p.updated_at),
    expiresAt: isoTime(p.expires_at),
  }));
}

/**
 * listWalletPayments' query (exported for the test of its plan). A payer's payments are those
 * to its phone, found in payments_payer (payer_phone, status), then sorted: a sort of the
 * payer's own payments, not a scan of everyone's (as payer_id alone, in no index, was). A page
 * starts beyond `after`.
 */
export function walletPaymentsQuery(
  db: Kysely<Database>,
  payerId: string,
  status: PaymentStatus | undefined,
  limit: number,
  after?: SortKey,
) {
  let query = db
    .selectFrom('payments as p')
    .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
    .selectAll('p')
    .select('s.pos_company_name')
    .where('p.payer_phone', '=', db.selectFrom('payers').select('phone').where('id', '=', payerId))
    .where('p.payer_id', '=', payerId);
  if (status) query = query.where('p.status', '=', status);
  if (after !== undefined) query = query.where(beyond('p.created_at', 'p.id', after, 'desc'));
  return query.orderBy('p.created_at', 'desc').orderBy('p.id', 'desc').limit(limit);
}
