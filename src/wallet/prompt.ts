import type { PaymentTable } from '../db/schema.js';
import type { OutgoingMessage } from '../notifier/notifier.js';

/** The SMS that asks a payer to approve a payment (CONTRACT §6). */
export function paymentPrompt(payment: PaymentTable, merchantName: string): OutgoingMessage {
  const amount = formatAmount(payment.amount);
  return {
    channel: 'sms',
    purpose: 'payment_prompt',
    to: payment.payer_phone,
    text: `Lipa: ${merchantName} requests ${payment.currency} ${amount} for order ${payment.order_id}. Open your Lipa wallet to approve or decline.`,
  };
}

/** 150050 → "1,500.50" (Intl's toLocaleString is slow on a hot path). */
export function formatAmount(minor: number): string {
  const whole = Math.trunc(minor / 100)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${whole}.${String(minor % 100).padStart(2, '0')}`;
}
