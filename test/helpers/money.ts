import assert from 'node:assert/strict';
import type { LipaClient, Payment, PaymentRequest } from '../../src/client/index.js';
import { accountId, balanceOf } from '../../src/ledger/ledger.js';
import {
  call,
  clientFor,
  createPayer,
  type MerchantSetup,
  merchantWithPos,
  type PayerFixture,
  payerToken,
  paymentBody,
  unique,
} from './client.js';
import { type Lipa, startLipa } from './harness.js';
import { type Receiver, startReceiver } from './receiver.js';

/** A merchant with a POS whose resultUrl is the receiver's, its signing client, and a payer with money who answers at once. */
export interface Till {
  merchant: MerchantSetup;
  client: LipaClient;
  payer: PayerFixture;
  payerToken: string;
}

/** Limits that would otherwise throttle a test that makes many requests quickly. */
export const NO_LIMITS = { RATE_LIMIT_KEY_PER_SEC: '100000', RATE_LIMIT_AUTH_IP_PER_MIN: '100000' };

export async function openTill(lipa: Lipa, receiver: Receiver, payerBalance = 1_000_000): Promise<Till> {
  const merchant = await merchantWithPos(lipa, { resultUrl: `${receiver.url}/result` });
  const payer = await createPayer(lipa, { balance: payerBalance });
  return { merchant, client: clientFor(lipa.url, merchant), payer, payerToken: await payerToken(lipa, payer) };
}

/** A payment request of `amount` to the till's payer (or `phone`), its callbacks to the receiver: pending (or no_user). */
export async function requestPayment(till: Till, receiver: Receiver, amount: number, phone = till.payer.phone): Promise<Payment> {
  const body = paymentBody(till.merchant, { amount, payer: { method: 'phone', value: phone } }) as unknown as PaymentRequest;
  body.urls = { callbackUrl: `${receiver.url}/cb/${body.orderId}` };
  const created = await till.client.createPayment(body);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body as Payment;
}

export const accept = (lipa: Lipa, till: Till, paymentId: string) =>
  call(lipa.url, 'POST', `/api/v1/wallet/payments/${paymentId}/accept`, { token: till.payerToken, body: { pin: till.payer.pin } });

/** A payment of `amount` the till's payer has paid. */
export async function paidPayment(lipa: Lipa, till: Till, receiver: Receiver, amount: number): Promise<Payment> {
  const payment = await requestPayment(till, receiver, amount);
  const answer = await accept(lipa, till, payment.paymentIdentifier);
  assert.equal(answer.status, 200, answer.text);
  assert.equal(answer.body.status, 'paid');
  return payment;
}

export const refundReference = () => unique('rf-');

/** A ledger account's balance in minor units (0 when it does not exist). */
export async function ledgerBalance(lipa: Lipa, kind: 'wallet' | 'merchant', ownerId: string): Promise<number> {
  return (await balanceOf(lipa.ctx.store.db, accountId(kind, ownerId))) ?? 0;
}

export const cents = (major: number) => Math.round(major * 100);

/** The callback bodies the receiver got on `pathPrefix` (the payment's callbackUrl is /cb/…, the POS resultUrl /result). */
export function callbackBodies(receiver: Receiver, pathPrefix: string) {
  return receiver.received.filter((r) => r.path.startsWith(pathPrefix)).map((r) => ({ request: r, body: JSON.parse(r.body) }));
}

/** A service without the rate limits, a callback receiver and a till on them: one describe block's world. */
export async function openShop(): Promise<{ lipa: Lipa; receiver: Receiver; till: Till }> {
  const lipa = await startLipa(NO_LIMITS);
  const receiver = await startReceiver();
  return { lipa, receiver, till: await openTill(lipa, receiver) };
}

export async function closeShop(shop: { lipa: Lipa; receiver: Receiver }): Promise<void> {
  await shop.lipa.close();
  await shop.receiver.close();
}
