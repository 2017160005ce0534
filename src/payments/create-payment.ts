import { createHash } from 'node:crypto';
import type { Static } from 'typebox';
import type { AppContext } from '../context.js';
import { lockPhone, type Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { PaymentTable } from '../db/schema.js';
import { AppError, assertText, FieldChecks, shown, validationError } from '../http/errors.js';
import { toMinorUnits } from '../ledger/money.js';
import { assertHttpUrl } from '../pos/points-of-sale.js';
import { randomId } from '../security/tokens.js';
import { paymentPrompt } from '../wallet/prompt.js';
import { type CreatePaymentBody, MAX_PAYMENT, SUPPORTED_CURRENCIES } from './schemas.js';
import { consumeNonce, type Signer } from './signed-request.js';
import { isDue, movePayment } from './transitions.js';

type Body = Static<typeof CreatePaymentBody>;

/** Field rules a JSON schema cannot say; the body names every field at fault (422). */
function validate(ctx: AppContext, body: Body): number {
  const checks = new FieldChecks();
  checks.run(() => {
    if (!SUPPORTED_CURRENCIES.includes(body.currency))
      throw validationError('currency', `is not supported (supported: ${SUPPORTED_CURRENCIES.join(', ')})`);
  });
  const amount = checks.run(() => toMinorUnits('amount', body.amount, MAX_PAYMENT));
  checks.run(() => assertText('orderId', body.orderId, 'name'));
  checks.run(() => assertText('description', body.description, 'text'));
  checks.run(() => {
    if (body.merchantStika === undefined) return;
    if (!/^[A-Z]{3}_[0-9]+$/.test(body.merchantStika))
      throw validationError('merchantStika', 'must be a currency code, an underscore and digits (e.g. KES_123456)');
    // Against a currency that is refused already, the prefix would be a second complaint of one fault.
    if (SUPPORTED_CURRENCIES.includes(body.currency) && !body.merchantStika.startsWith(`${body.currency}_`))
      throw validationError('merchantStika', `must start with the payment currency (${body.currency}_)`);
  });
  checks.run(() => {
    if (body.payer.method !== 'phone') throw validationError('payer.method', 'must be "phone"');
  });
  checks.run(() => {
    if (!/^[0-9]{8,15}$/.test(body.payer.value))
      throw validationError('payer.value', 'must be 8 to 15 digits with country code, no plus sign');
  });
  checks.run(() => assertHttpUrl(ctx, 'urls.callbackUrl', body.urls.callbackUrl, true));
  checks.run(() => {
    if (body.urls.successRedirectUrl !== undefined) assertHttpUrl(ctx, 'urls.successRedirectUrl', body.urls.successRedirectUrl, true);
  });
  checks.done();
  return amount as number;
}

/** The same (terminalId, orderId) with the same fingerprint is the same payment. */
function fingerprint(body: Body, amount: number): string {
  const normalised = [
    body.terminalId,
    body.orderId,
    amount,
    body.currency,
    body.merchantStika ?? null,
    body.description ?? null,
    body.payer.method,
    body.payer.value,
    body.urls.callbackUrl,
    body.urls.successRedirectUrl ?? null,
  ];
  return createHash('sha256').update(JSON.stringify(normalised)).digest('hex');
}

export interface CreatedPayment {
  payment: PaymentTable;
  /** false when an identical earlier request already created it (idempotent replay). */
  created: boolean;
}

/**
 * Endpoint 5: creates a payment for a registered payer (pending, prompted by SMS) or an
 * unknown phone (no_user). (terminalId, orderId) is an idempotency key.
 */
export async function createPayment(ctx: AppContext, signer: Signer, body: Body): Promise<CreatedPayment> {
  const amount = validate(ctx, body);
  // The terminal, and the payer's wallet if the phone has one, in one query.
  const db = ctx.store.db;
  const { rows } = await hotQuery(db, 'create-payment.terminal', [body.payer.value, body.terminalId, signer.merchantId], () =>
    db
      .selectFrom('points_of_sale as s')
      .select((eb) => [
        's.id',
        's.pos_company_name',
        eb.selectFrom('payers as p').select('p.id').where('p.phone', '=', body.payer.value).as('payer_id'),
      ])
      .where('s.terminal_id', '=', body.terminalId)
      .where('s.merchant_id', '=', signer.merchantId),
  );
  const pos = rows[0];
  if (!pos) throw new AppError('not_found', `No terminal ${body.terminalId} is registered to your merchant account.`);
  const payer = pos.payer_id === null ? undefined : { id: pos.payer_id };
  const print = fingerprint(body, amount);
  const now = ctx.now();
  const row: PaymentTable = {
    id: randomId('pay_'),
    merchant_id: signer.merchantId,
    pos_id: pos.id,
    terminal_id: body.terminalId,
    api_key_id: signer.keyId,
    order_id: body.orderId,
    amount,
    currency: body.currency,
    merchant_stika: body.merchantStika ?? null,
    description: body.description ?? null,
    payer_phone: body.payer.value,
    payer_id: payer?.id ?? null,
    callback_url: body.urls.callbackUrl,
    success_redirect_url: body.urls.successRedirectUrl ?? null,
    fingerprint: print,
    status: payer ? 'pending' : 'no_user',
    reason: null,
    refunded_amount: 0,
    created_at: now,
    updated_at: now,
    expires_at: now + ctx.config.paymentTtlSeconds * 1000,
  };

  const outcome = await ctx.store.write(async (tx) => {
    await consumeNonce(tx, signer);
    const existing = await findByOrder(tx, body.terminalId, body.orderId);
    if (existing) return expiredIfDue(tx, existing, now);
    if (row.status === 'no_user') {
      // A wallet registered for this phone since the lookup above must not leave the payment
      // waiting as no_user: look again under the phone's lock (createPayer takes it too).
      await lockPhone(ctx.store, tx, row.payer_phone);
      const registered = await tx.selectFrom('payers').select('id').where('phone', '=', row.payer_phone).executeTakeFirst();
      if (registered) Object.assign(row, { status: 'pending', payer_id: registered.id });
    }
    const inserted = await hotQuery(tx, 'create-payment.insert', Object.values(row), () =>
      tx
        .insertInto('payments')
        .values(row)
        .onConflict((oc) => oc.columns(['terminal_id', 'order_id']).doNothing()),
    );
    // Lost a race with a concurrent request on another connection: theirs is the payment.
    if (Number(inserted.numAffectedRows ?? 0n) === 0) return (await findByOrder(tx, body.terminalId, body.orderId)) ?? null;
    if (row.status === 'pending') await ctx.notifier.send(tx, paymentPrompt(row, pos.pos_company_name), now);
    return 'created' as const;
  });
  signer.nonceRecorded = true;
  if (outcome === 'created') return { payment: row, created: true };
  if (outcome === null || outcome.fingerprint !== print) {
    throw new AppError(
      'idempotency_conflict',
      `Order ${body.orderId} on terminal ${body.terminalId} already has a payment with a different request body.`,
    );
  }
  return { payment: outcome, created: false };
}

async function findByOrder(tx: Tx, terminalId: string, orderId: string): Promise<PaymentTable | undefined> {
  const { rows } = await hotQuery(tx, 'create-payment.by-order', [terminalId, orderId], () =>
    tx.selectFrom('payments').selectAll().where('terminal_id', '=', terminalId).where('order_id', '=', orderId),
  );
  return rows[0];
}

/** Endpoint 6: the current state of one of the caller's payments. */
export async function findPayment(ctx: AppContext, signer: Signer, paymentIdentifier: string): Promise<PaymentTable> {
  const payment = await ctx.store.write(async (tx) => {
    await consumeNonce(tx, signer);
    const { rows } = await hotQuery(tx, 'payment-status.select', [paymentIdentifier, signer.merchantId], () =>
      tx.selectFrom('payments').selectAll().where('id', '=', paymentIdentifier).where('merchant_id', '=', signer.merchantId),
    );
    return rows[0] && expiredIfDue(tx, rows[0], ctx.now());
  });
  signer.nonceRecorded = true;
  if (!payment) throw new AppError('not_found', `No payment ${shown(paymentIdentifier)}.`);
  return payment;
}

/**
 * The payment as it stands. Past its expiry a pending payment can only become expired: it
 * does so now, rather than being answered as pending until the sweep comes by. The move is
 * conditional, so it happens once however many requests, sweeps and instances race it.
 */
async function expiredIfDue(tx: Tx, payment: PaymentTable, now: number): Promise<PaymentTable> {
  if (!isDue(payment, now)) return payment;
  const moved = await movePayment(tx, payment.id, { to: 'expired' }, now);
  return moved ?? tx.selectFrom('payments').selectAll().where('id', '=', payment.id).executeTakeFirstOrThrow();
}
