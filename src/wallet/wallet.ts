import type { Kysely } from 'kysely';
import type { AppContext } from '../context.js';
import type { Database, PaymentStatus } from '../db/schema.js';
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
 * The payer's payments, newest first (at most 200), optionally of one status. Those past
 * their expiry are expired first, so that none shows as waiting that can no longer be paid.
 */
export async function listWalletPayments(ctx: AppContext, payerId: string, status: PaymentStatus | undefined) {
  await expireDuePayments(ctx, { payerId });
  const rows = await walletPaymentsQuery(ctx.store.db, payerId, status).execute();
  return rows.map((p) => ({
    paymentIdentifier: p.id,
    status: p.status,
    ...(p.status === 'declined' && p.reason ? { reason: p.reason } : {}),
    merchantName: p.pos_company_name,
    orderId: p.order_id,
    description: p.description,
    amount: fromMinorUnits(p.amount),
    currency: p.currency,
    createdAt: isoTime(p.created_at),
    updatedAt: isoTime(p.updated_at),
    expiresAt: isoTime(p.expires_at),
  }));
}

/**
 * listWalletPayments' query (exported for the test of its plan). A payer's payments are those
 * to its phone, found in payments_payer (payer_phone, status), then sorted: a sort of the
 * payer's own payments, not a scan of everyone's (as payer_id alone, in no index, was).
 */
export function walletPaymentsQuery(db: Kysely<Database>, payerId: string, status: PaymentStatus | undefined) {
  let query = db
    .selectFrom('payments as p')
    .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
    .selectAll('p')
    .select('s.pos_company_name')
    .where('p.payer_phone', '=', db.selectFrom('payers').select('phone').where('id', '=', payerId))
    .where('p.payer_id', '=', payerId);
  if (status) query = query.where('p.status', '=', status);
  return query.orderBy('p.created_at', 'desc').orderBy('p.id', 'desc').limit(200);
}
