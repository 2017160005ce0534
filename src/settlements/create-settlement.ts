import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/database.js';
import type { SettlementTable } from '../db/schema.js';
import { AppError, assertText, FieldChecks, shown } from '../http/errors.js';
import { isoTime } from '../http/time.js';
import { accountId, CASH_IN_OWNER, InsufficientFundsError, openAccount, postTransaction } from '../ledger/ledger.js';
import { CURRENCY, fromMinorUnits, MAX_DEPOSIT, toMinorUnits } from '../ledger/money.js';
import { randomId } from '../security/tokens.js';

/**
 * The operator pays out a merchant's balance to its bank (CONTRACT §13): one ledger
 * transaction debits the merchant and credits the settlement clearing account, with the
 * settlement's row. The debit is conditional on the balance, so a settlement racing refunds
 * never takes it below zero: too little → 409 insufficient_balance, nothing changes.
 * (merchant, reference) is an idempotency key: the same settlement again answers the one
 * recorded (created: false), the same reference with another amount is 409.
 */
export async function createSettlement(ctx: AppContext, merchantId: string, input: { amount: number; reference: string }) {
  const checks = new FieldChecks();
  const amount = checks.run(() => toMinorUnits('amount', input.amount, MAX_DEPOSIT));
  checks.run(() => assertText('reference', input.reference, 'name'));
  checks.done();
  const now = ctx.now();
  const row: SettlementTable = {
    id: randomId('stl_'),
    merchant_id: merchantId,
    amount: amount as number,
    currency: CURRENCY,
    reference: input.reference,
    created_at: now,
  };
  try {
    await ctx.store.write(async (tx) => {
      const merchant = await tx.selectFrom('merchants').select('id').where('id', '=', merchantId).executeTakeFirst();
      if (!merchant) throw new AppError('not_found', `No merchant ${shown(merchantId)}.`);
      const clearing = await openAccount(tx, 'clearing', CASH_IN_OWNER, now);
      await tx.insertInto('settlements').values(row).execute();
      await postTransaction(
        tx,
        {
          kind: 'settlement',
          reference: row.id,
          postings: [
            { accountId: accountId('merchant', merchantId), amount: -row.amount },
            { accountId: clearing, amount: row.amount },
          ],
        },
        now,
      );
    });
  } catch (error) {
    if (error instanceof InsufficientFundsError)
      throw new AppError('insufficient_balance', `The merchant's balance is less than ${CURRENCY} ${fromMinorUnits(row.amount)}.`);
    if (!isUniqueViolation(error)) throw error;
    const earlier = await ctx.store.db
      .selectFrom('settlements')
      .selectAll()
      .where('merchant_id', '=', merchantId)
      .where('reference', '=', input.reference)
      .executeTakeFirst();
    if (!earlier || Number(earlier.amount) !== row.amount)
      throw new AppError(
        'idempotency_conflict',
        `The merchant already has a settlement with reference ${shown(input.reference)}, of another amount.`,
      );
    return { settlement: view(earlier), created: false };
  }
  return { settlement: view(row), created: true };
}

function view(s: SettlementTable) {
  return {
    settlementId: s.id,
    merchantId: s.merchant_id,
    amount: fromMinorUnits(Number(s.amount)),
    currency: s.currency,
    reference: s.reference,
    createdAt: isoTime(Number(s.created_at)),
  };
}
