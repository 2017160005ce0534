import type { PaymentTable } from '../db/schema.js';
import { fromMinorUnits } from '../ledger/money.js';
import type { OutgoingMessage } from '../notifier/notifier.js';

/** The SMS that asks a payer to approve a payment (CONTRACT §6). */
export function paymentPrompt(payment: PaymentTable, merchantName: string): OutgoingMessage {
  const amount = fromMinorUnits(payment.amount).toLocaleString('en-KE', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return {
    channel: 'sms',
    purpose: 'payment_prompt',
    to: payment.payer_phone,
    text: `Lipa: ${merchantName} requests ${payment.currency} ${amount} for order ${payment.order_id}. Open your Lipa wallet to approve or decline.`,
  };
}
