import type { RefundTable } from '../db/schema.js';
import { isoTime } from '../http/time.js';
import { fromMinorUnits } from '../ledger/money.js';

/** A refund as the API and its callback show it (CONTRACT §11). */
export function toRefundView(r: RefundTable) {
  return {
    refundIdentifier: r.id,
    paymentIdentifier: r.payment_id,
    refundReference: r.refund_reference,
    amount: fromMinorUnits(r.amount),
    currency: r.currency,
    status: r.status,
    reason: r.reason,
    createdAt: isoTime(r.created_at),
  };
}
