import type { AppContext } from '../context.js';
import type { PaymentTable } from '../db/schema.js';
import { AppError, shown } from '../http/errors.js';
import { type Asker, consumeNonce } from './signed-request.js';
import { isDue, movePayment } from './transitions.js';

/**
 * Calls off a payment the payer has not answered (CONTRACT §11): pending or no_user becomes
 * declined with reason cancelled_by_merchant, with its callback event. The move is conditional
 * on the status, like the payer's accept and decline, so of a cancel and an accept that race
 * exactly one takes effect, and money moves only if the accept won.
 */
export async function cancelPayment(ctx: AppContext, asker: Asker, paymentIdentifier: string): Promise<PaymentTable> {
  const { merchantId, signer } = asker;
  const now = ctx.now();
  const outcome = await ctx.store.write(async (tx) => {
    if (signer) await consumeNonce(tx, signer);
    const own = await tx
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentIdentifier)
      .where('merchant_id', '=', merchantId)
      .executeTakeFirst();
    if (!own) return null;
    const moved = await movePayment(tx, paymentIdentifier, { to: 'declined', reason: 'cancelled_by_merchant' }, now);
    if (moved) return moved;
    // Lost to an answer, or past its expiry: it is what it became (expired now if it was due).
    const current = await tx.selectFrom('payments').selectAll().where('id', '=', paymentIdentifier).executeTakeFirstOrThrow();
    const expired = isDue(current, now) ? await movePayment(tx, paymentIdentifier, { to: 'expired' }, now) : null;
    return { refused: (expired ?? current).status };
  });
  if (signer) signer.nonceRecorded = true;
  if (outcome === null) throw new AppError('not_found', `No payment ${shown(paymentIdentifier)}.`);
  if ('refused' in outcome) {
    throw new AppError('payment_not_pending', `Payment ${paymentIdentifier} can no longer be cancelled: it is ${outcome.refused}.`);
  }
  return outcome;
}
