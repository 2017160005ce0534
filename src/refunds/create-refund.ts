import { createHash } from 'node:crypto';
import type { Static } from 'typebox';
import { enqueueEvent } from '../callbacks/events.js';
import type { AppContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { PaymentTable, RefundTable } from '../db/schema.js';
import { AppError, assertText, FieldChecks, shown, validationError } from '../http/errors.js';
import { accountId, InsufficientFundsError, postTransaction } from '../ledger/ledger.js';
import { fromMinorUnits, toMinorUnits } from '../ledger/money.js';
import { MAX_PAYMENT } from '../payments/schemas.js';
import { type Asker, consumeNonce, type Signer } from '../payments/signed-request.js';
import { randomId } from '../security/tokens.js';
import { formatAmount } from '../wallet/prompt.js';
import { toRefundView } from './refund-view.js';
import type { CreateRefundBody } from './schemas.js';

type Body = Static<typeof CreateRefundBody>;

const DAY_MS = 86_400_000;

/** Field rules a JSON schema cannot say; the body names every field at fault (422). */
function validate(body: Body): number | null {
  const checks = new FieldChecks();
  checks.run(() => assertText('refundReference', body.refundReference, 'name'));
  checks.run(() => assertText('reason', body.reason, 'line'));
  const amount = body.amount === undefined ? null : checks.run(() => toMinorUnits('amount', body.amount as number, MAX_PAYMENT));
  checks.done();
  return amount ?? null;
}

/** The same refundReference with the same fingerprint is the same refund. */
function fingerprint(body: Body): string {
  const normalised = [body.paymentIdentifier, body.refundReference, body.amount ?? null, body.reason ?? null];
  return createHash('sha256').update(JSON.stringify(normalised)).digest('hex');
}

/** A concurrent request took the refundReference first: its refund is the answer. */
class ReferenceTaken extends Error {}

export interface CreatedRefund {
  refund: RefundTable;
  /** false when an identical earlier request already made it (idempotent replay). */
  created: boolean;
}

/**
 * Gives money back on a paid payment (CONTRACT §11), whole or in part, from the merchant's
 * balance. In one transaction: the ledger transaction (merchant debited, payer's wallet
 * credited), the payment's refunded amount, the refund row, its callback event and the
 * payer's SMS. Concurrent refunds of one payment take turns (PostgreSQL: the payment's row is
 * read locked; SQLite: one writer) and never refund more than was paid; the merchant's debit is conditional on its
 * balance, so no interleaving takes the balance below zero. (merchant, refundReference) is
 * an idempotency key.
 */
export async function createRefund(ctx: AppContext, asker: Asker, body: Body): Promise<CreatedRefund> {
  const { merchantId, signer } = asker;
  const requested = validate(body);
  const print = fingerprint(body);
  const now = ctx.now();
  const id = randomId('rfd_');
  let outcome: CreatedRefund;
  // Whether the unit that answers committed, and with it the request's nonce.
  let nonceRecorded = true;
  try {
    outcome = await ctx.store.write(async (tx) => {
      if (signer) await consumeNonce(tx, signer);
      const earlier = await byReference(tx, merchantId, body.refundReference);
      if (earlier) return { refund: earlier, created: false };
      // On PostgreSQL the payment's row alone is held (FOR UPDATE OF p): concurrent refunds of
      // it take turns, while the merchant's and the terminal's rows stay free for its other work.
      const { rows } = await hotQuery(tx, 'refund.payment', [body.paymentIdentifier, merchantId], () => {
        const query = tx
          .selectFrom('payments as p')
          .innerJoin('merchants as m', 'm.id', 'p.merchant_id')
          .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
          .selectAll('p')
          .select(['m.name as merchant_name', 's.result_url'])
          .where('p.id', '=', body.paymentIdentifier)
          .where('p.merchant_id', '=', merchantId);
        return ctx.store.dialect === 'postgres' ? query.forUpdate(['p'] as never) : query;
      });
      const payment = rows[0];
      if (!payment) throw new AppError('not_found', `No payment ${shown(body.paymentIdentifier)}.`);
      const amount = refundableAmount(ctx, payment, requested, now);
      try {
        await postTransaction(
          tx,
          {
            kind: 'refund',
            reference: id,
            orderId: payment.order_id,
            postings: [
              { accountId: accountId('merchant', payment.merchant_id), amount: -amount },
              { accountId: accountId('wallet', payment.payer_id as string), amount },
            ],
          },
          now,
        );
      } catch (error) {
        if (!(error instanceof InsufficientFundsError)) throw error;
        throw new AppError(
          'insufficient_balance',
          `Your balance is less than ${payment.currency} ${fromMinorUnits(amount)}: refunds are paid from it.`,
        );
      }
      const updated = await hotQuery(tx, 'refund.add-to-payment', [amount, payment.id, 'paid', amount], () =>
        tx
          .updateTable('payments')
          .set((eb) => ({ refunded_amount: eb('refunded_amount', '+', amount) }))
          .where('id', '=', payment.id)
          .where('status', '=', 'paid')
          .where((eb) => eb(eb('refunded_amount', '+', amount), '<=', eb.ref('amount')))
          .returningAll(),
      );
      const refunded = updated.rows[0];
      // Unreachable while the row is locked (checked above): a rollback, never an over-refund.
      if (!refunded) throw new Error(`refund of ${payment.id} would exceed the amount paid`);
      const refund: RefundTable = {
        id,
        merchant_id: payment.merchant_id,
        payment_id: payment.id,
        api_key_id: signer?.keyId ?? null,
        refund_reference: body.refundReference,
        amount,
        currency: payment.currency,
        reason: body.reason ?? null,
        status: 'succeeded',
        fingerprint: print,
        created_at: now,
      };
      const inserted = await hotQuery(tx, 'refund.insert', Object.values(refund), () =>
        tx
          .insertInto('refunds')
          .values(refund)
          .onConflict((oc) => oc.columns(['merchant_id', 'refund_reference']).doNothing()),
      );
      if (Number(inserted.numAffectedRows ?? 0n) === 0) throw new ReferenceTaken();
      await enqueueEvent(tx, refunded, payment.result_url, 'refund.succeeded', { refund: toRefundView(refund) }, now);
      await ctx.notifier.send(
        tx,
        {
          channel: 'sms',
          purpose: 'refund_notice',
          to: payment.payer_phone,
          text: `Lipa: ${payment.merchant_name} refunded ${payment.currency} ${formatAmount(amount)} for order ${payment.order_id} to your wallet.`,
        },
        now,
      );
      return { refund, created: true };
    });
  } catch (error) {
    if (!(error instanceof ReferenceTaken)) throw error;
    // The transaction rolled back whole, nonce included: the onSend hook records it.
    const taken = await byReference(ctx.store.db, merchantId, body.refundReference);
    if (!taken) throw error;
    outcome = { refund: taken, created: false };
    nonceRecorded = false;
  }
  if (signer) signer.nonceRecorded = nonceRecorded;
  if (!outcome.created && outcome.refund.fingerprint !== print) {
    throw new AppError('idempotency_conflict', `Refund ${body.refundReference} already exists with a different request body.`);
  }
  return outcome;
}

/** How much this refund is: the amount asked for, or all that is left; every refusal of CONTRACT §11. */
function refundableAmount(ctx: AppContext, payment: PaymentTable, requested: number | null, now: number): number {
  if (payment.status !== 'paid') {
    const status = payment.status === 'pending' && payment.expires_at <= now ? 'expired' : payment.status;
    throw new AppError('payment_not_refundable', `Payment ${payment.id} is ${status}: only a paid payment can be refunded.`);
  }
  // A paid payment's last status change was to paid: its updated_at is when it was paid.
  if (payment.updated_at + ctx.config.refundWindowDays * DAY_MS < now) {
    throw new AppError(
      'refund_window_closed',
      `Payment ${payment.id} was paid more than ${ctx.config.refundWindowDays} days ago: it can no longer be refunded.`,
    );
  }
  const left = payment.amount - payment.refunded_amount;
  // All of it by default: nothing is left to refund. An amount asked for is more than is left (422).
  if (left === 0 && requested === null) throw new AppError('payment_not_refundable', `Payment ${payment.id} is already refunded in full.`);
  if (requested !== null && requested > left) {
    throw validationError('amount', `must be at most ${fromMinorUnits(left)}, what is still refundable of this payment`);
  }
  return requested ?? left;
}

async function byReference(db: Tx, merchantId: string, reference: string): Promise<RefundTable | undefined> {
  const { rows } = await hotQuery(db, 'refund.by-reference', [merchantId, reference], () =>
    db.selectFrom('refunds').selectAll().where('merchant_id', '=', merchantId).where('refund_reference', '=', reference),
  );
  return rows[0];
}

/** The refund status endpoint: one of the caller's refunds. */
export async function findRefund(ctx: AppContext, signer: Signer, refundIdentifier: string): Promise<RefundTable> {
  const refund = await ctx.store.write(async (tx) => {
    await consumeNonce(tx, signer);
    return tx
      .selectFrom('refunds')
      .selectAll()
      .where('id', '=', refundIdentifier)
      .where('merchant_id', '=', signer.merchantId)
      .executeTakeFirst();
  });
  signer.nonceRecorded = true;
  if (!refund) throw new AppError('not_found', `No refund ${shown(refundIdentifier)}.`);
  return refund;
}
