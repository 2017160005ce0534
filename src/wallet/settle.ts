import type { AppContext } from '../context.js';
import type { PaymentTable } from '../db/schema.js';
import { AppError, shown } from '../http/errors.js';
import { accountId, InsufficientFundsError, postDeposit, postTransaction } from '../ledger/ledger.js';
import { claimMove, emitStatusChange, movePayment } from '../payments/transitions.js';
import { testPayerOf } from './staging-payers.js';

/**
 * The payer's answer to a pending payment. Accepting debits the payer and credits the
 * merchant in one ledger transaction, in the same database transaction as the status change
 * and its callback event; with too little money the payment is declined (insufficient_funds)
 * instead. Declining moves no money. A payment that is no longer pending answers 409; an
 * unknown one, or another payer's, 404.
 */
export async function settlePayment(
  ctx: AppContext,
  payerId: string,
  paymentId: string,
  answer: 'accept' | 'decline',
): Promise<PaymentTable> {
  const now = ctx.now();
  const settled = await ctx.store.write(async (tx) => {
    if (answer === 'decline') {
      return movePayment(tx, paymentId, { to: 'declined', reason: 'declined_by_payer', onlyPayer: payerId }, now);
    }
    // Claim the payment first (conditional), then move the money; the event follows the outcome.
    const claimed = await claimMove(tx, paymentId, { to: 'paid', onlyPayer: payerId }, now);
    if (!claimed) return null;
    const wallet = accountId('wallet', payerId);
    const money = testPayerOf(ctx, claimed.payer_phone)?.money;
    // Staging test payers 1-3 never run out of money: top up what this payment needs.
    if (money === 'bottomless') await postDeposit(tx, payerId, claimed.amount, now);
    let result = claimed;
    try {
      // Test payer 4 always has none, whatever an operator deposited before that was refused.
      if (money === 'none') throw new InsufficientFundsError(wallet);
      await postTransaction(
        tx,
        {
          kind: 'payment',
          reference: claimed.id,
          orderId: claimed.order_id,
          postings: [
            { accountId: wallet, amount: -claimed.amount },
            { accountId: accountId('merchant', claimed.merchant_id), amount: claimed.amount },
          ],
        },
        now,
      );
    } catch (error) {
      if (!(error instanceof InsufficientFundsError)) throw error;
      result = await tx
        .updateTable('payments')
        .set({ status: 'declined', reason: 'insufficient_funds' })
        .where('id', '=', paymentId)
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    await emitStatusChange(tx, result, now);
    return result;
  });
  if (!settled) {
    // Unknown and another payer's alike are 404 (nothing said of other payers' payments);
    // the payer's own that is no longer pending is 409.
    const own = await ctx.store.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentId)
      .where('payer_id', '=', payerId)
      .executeTakeFirst();
    if (!own) throw new AppError('not_found', `No payment ${shown(paymentId)} for this wallet.`);
    // Still pending on record, past its expiry: the sweep has not come yet.
    const now = own.status === 'pending' ? 'expired' : own.status;
    throw new AppError('payment_not_pending', `Payment ${paymentId} can no longer be answered: it is ${now}.`);
  }
  return settled;
}
