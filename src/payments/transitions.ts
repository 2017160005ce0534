import { enqueueStatusEvent } from '../callbacks/events.js';
import type { Tx } from '../db/database.js';
import type { DeclineReason, PaymentStatus, PaymentTable } from '../db/schema.js';
import { countPaymentStatus } from '../ops/counters.js';

/**
 * The lifecycle (CONTRACT §6): pending → paid | declined | expired; no_user → pending |
 * expired, or declined when the merchant cancels it (§11). Terminal states never change. Every move is a conditional update on the current
 * status, so of two racing moves exactly one takes effect, and it writes its callback event
 * in the same transaction.
 */
export const NEXT: Record<PaymentStatus, readonly PaymentStatus[]> = {
  no_user: ['pending', 'declined', 'expired'],
  pending: ['paid', 'declined', 'expired'],
  paid: [],
  declined: [],
  expired: [],
};

/** Whether a payment is past its expiry and still waiting: it can only become expired now. */
export function isDue(payment: Pick<PaymentTable, 'status' | 'expires_at'>, now: number): boolean {
  return (payment.status === 'pending' || payment.status === 'no_user') && payment.expires_at <= now;
}

export interface Move {
  to: PaymentStatus;
  reason?: DeclineReason | null;
  payerId?: string;
  /** Only a payment of this payer may move (wallet actions). */
  onlyPayer?: string;
}

/** Applies a move and writes its callback event, if the payment is still in a state that allows it; null if it lost the race. */
export async function movePayment(tx: Tx, id: string, move: Move, now: number): Promise<PaymentTable | null> {
  const moved = await claimMove(tx, id, move, now);
  if (moved) await emitStatusChange(tx, moved, now);
  return moved;
}

/**
 * The conditional update of movePayment without its event, for a caller that may change the
 * outcome in the same transaction before the event is written (an accept that finds too
 * little money declines instead).
 */
export async function claimMove(tx: Tx, id: string, move: Move, now: number): Promise<PaymentTable | null> {
  const from = (Object.keys(NEXT) as PaymentStatus[]).filter((status) => NEXT[status].includes(move.to));
  let query = tx
    .updateTable('payments')
    .set({
      status: move.to,
      reason: move.reason ?? null,
      updated_at: now,
      ...(move.payerId ? { payer_id: move.payerId } : {}),
    })
    .where('id', '=', id)
    .where('status', 'in', from);
  // Only expiry may act on a payment past its expiry time: an accept racing expiry loses.
  if (move.to !== 'expired') query = query.where('expires_at', '>', now);
  if (move.onlyPayer) query = query.where('payer_id', '=', move.onlyPayer);
  return (await query.returningAll().executeTakeFirst()) ?? null;
}

/** Writes the callback event of a status change (every change has one) and counts the change once it commits. */
export async function emitStatusChange(tx: Tx, payment: PaymentTable, now: number): Promise<void> {
  countPaymentStatus(tx, payment.status);
  const pos = await tx.selectFrom('points_of_sale').select('result_url').where('id', '=', payment.pos_id).executeTakeFirstOrThrow();
  await enqueueStatusEvent(tx, payment, pos.result_url, now);
}
