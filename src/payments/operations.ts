import { defineOperation, lockPhone, type Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { MessageTable, PaymentTable } from '../db/schema.js';
import { insertMessage } from '../messaging/store.js';

/**
 * The database work of the signed payment endpoints, as operations (Db.run): on SQLite
 * they run on the writer thread. Plain data in, plain data out; the HTTP side turns the
 * outcomes into answers.
 */

/** A signed request's nonce, to be remembered until it can no longer be replayed. */
export interface NonceRecord {
  keyId: string;
  nonce: string;
  expiresAt: number;
}

/** Records a nonce in the caller's transaction; false when it was used before. */
export async function recordNonce(tx: Tx, record: NonceRecord): Promise<boolean> {
  const inserted = await hotQuery(tx, 'signed-request.consume-nonce', [record.keyId, record.nonce, record.expiresAt], () =>
    tx
      .insertInto('nonces')
      .values({ key_id: record.keyId, nonce: record.nonce, expires_at: record.expiresAt })
      .onConflict((oc) => oc.columns(['key_id', 'nonce']).doNothing()),
  );
  return Number(inserted.numAffectedRows ?? 0n) === 1;
}

/** A nonce on its own, for a signed request whose operation never ran (a refused body). */
export const recordNonceOperation = defineOperation('nonces.record', (tx, record: NonceRecord) => recordNonce(tx, record));

export type CreateOutcome =
  | { kind: 'nonce_reused' }
  | { kind: 'created'; payment: PaymentTable }
  /** The order already has a payment (null: it vanished, which only a purge could do). */
  | { kind: 'existing'; payment: PaymentTable | null };

/**
 * Endpoint 5's transaction: the nonce, the (terminalId, orderId) idempotency check, the
 * payment, and its SMS prompt when the payer has a wallet. `prompt` is the prompt's row,
 * prepared in case the payment is (or becomes) pending.
 */
export const createPaymentOperation = defineOperation(
  'payments.create',
  async (tx, args: { nonce: NonceRecord; payment: PaymentTable; prompt: MessageTable }, dialect): Promise<CreateOutcome> => {
    if (!(await recordNonce(tx, args.nonce))) return { kind: 'nonce_reused' };
    const { terminal_id: terminalId, order_id: orderId } = args.payment;
    const existing = await findByOrder(tx, terminalId, orderId);
    if (existing) return { kind: 'existing', payment: existing };
    // A copy: a unit may run twice (group commit), and must find its arguments unchanged.
    const row = { ...args.payment };
    if (row.status === 'no_user') {
      // A wallet registered for this phone since the caller looked must not leave the
      // payment waiting as no_user: look again under the phone's lock (createPayer takes it too).
      await lockPhone(dialect, tx, row.payer_phone);
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
    if (Number(inserted.numAffectedRows ?? 0n) === 0)
      return { kind: 'existing', payment: (await findByOrder(tx, terminalId, orderId)) ?? null };
    if (row.status === 'pending') await insertMessage(tx, args.prompt);
    return { kind: 'created', payment: row };
  },
);

async function findByOrder(tx: Tx, terminalId: string, orderId: string): Promise<PaymentTable | undefined> {
  const { rows } = await hotQuery(tx, 'create-payment.by-order', [terminalId, orderId], () =>
    tx.selectFrom('payments').selectAll().where('terminal_id', '=', terminalId).where('order_id', '=', orderId),
  );
  return rows[0];
}

export type StatusOutcome = { kind: 'nonce_reused' } | { kind: 'found'; payment: PaymentTable | null };

/** Endpoint 6's transaction: the nonce, then the payment if it is the merchant's. */
export const paymentStatusOperation = defineOperation(
  'payments.status',
  async (tx, args: { nonce: NonceRecord; paymentId: string; merchantId: string }): Promise<StatusOutcome> => {
    if (!(await recordNonce(tx, args.nonce))) return { kind: 'nonce_reused' };
    const { rows } = await hotQuery(tx, 'payment-status.select', [args.paymentId, args.merchantId], () =>
      tx.selectFrom('payments').selectAll().where('id', '=', args.paymentId).where('merchant_id', '=', args.merchantId),
    );
    return { kind: 'found', payment: rows[0] ?? null };
  },
);
