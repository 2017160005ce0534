import type { AppContext } from '../context.js';
import type { PaymentTable } from '../db/schema.js';
import { isoTime } from '../http/time.js';
import { fromMinorUnits } from '../ledger/money.js';

/** The hosted payment page of a payment (CONTRACT §10). */
export function paymentUrl(ctx: AppContext, origin: string, id: string): string {
  return `${ctx.config.publicBaseUrl ?? origin}/pay/${id}`;
}

/** The `payment` object of a callback (CONTRACT §7). */
export function toCallbackPayment(p: PaymentTable) {
  return {
    paymentIdentifier: p.id,
    status: p.status,
    ...(p.status === 'declined' && p.reason ? { reason: p.reason } : {}),
    terminalId: p.terminal_id,
    orderId: p.order_id,
    amount: fromMinorUnits(p.amount),
    refundedAmount: fromMinorUnits(p.refunded_amount),
    currency: p.currency,
    merchantStika: p.merchant_stika,
    updatedAt: isoTime(p.updated_at),
  };
}

/** A payment as the merchant API shows it: the callback's fields and a few more. */
export function toPaymentView(ctx: AppContext, origin: string, p: PaymentTable) {
  return {
    ...toCallbackPayment(p),
    description: p.description,
    createdAt: isoTime(p.created_at),
    expiresAt: isoTime(p.expires_at),
    paymentUrl: paymentUrl(ctx, origin, p.id),
  };
}
