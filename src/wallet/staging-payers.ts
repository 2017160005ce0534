import { randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import { CASH_IN_OWNER, openAccount } from '../ledger/ledger.js';
import { hashPassword, pepperOf } from '../security/passwords.js';
import { settlePayment } from './settle.js';

interface TestPayer {
  answer: 'accept' | 'decline' | 'never';
  /** 1-3 never run out of money; 4 always has none (CONTRACT §6). */
  money: 'bottomless' | 'none';
}

/**
 * Staging test payers, like test card numbers (CONTRACT §6). Present in every staging
 * database; they answer on their own about a second after a payment reaches them.
 */
export const TEST_PAYERS: Readonly<Record<string, TestPayer>> = {
  '254708000001': { answer: 'accept', money: 'bottomless' },
  '254708000002': { answer: 'decline', money: 'bottomless' },
  '254708000003': { answer: 'never', money: 'bottomless' },
  '254708000004': { answer: 'accept', money: 'none' },
};

const ANSWER_AFTER_MS = 1000;
/** The test payers that answer on their own (all but the one that never does). */
const ANSWERING = Object.keys(TEST_PAYERS).filter((phone) => TEST_PAYERS[phone]?.answer !== 'never');

/** The test payer behind a phone, in staging only: in production these are ordinary numbers. */
export function testPayerOf(ctx: AppContext, phone: string): TestPayer | undefined {
  return ctx.config.env === 'staging' ? TEST_PAYERS[phone] : undefined;
}

/** Creates the test payers if missing (idempotent; safe with several instances). */
export async function ensureStagingPayers(ctx: AppContext): Promise<void> {
  const existing = await ctx.store.db.selectFrom('payers').select('phone').where('phone', 'in', Object.keys(TEST_PAYERS)).execute();
  const missing = Object.keys(TEST_PAYERS).filter((phone) => !existing.some((p) => p.phone === phone));
  if (missing.length === 0) return;
  // Nobody knows their PIN: they answer through the simulator, not the wallet API.
  const pinHash = await hashPassword(randomBytes(16).toString('hex'), pepperOf(ctx));
  const now = ctx.now();
  await ctx.store.write(async (tx) => {
    for (const phone of missing) {
      const id = `test-payer-${phone}`;
      await tx
        .insertInto('payers')
        .values({ id, phone, name: `Staging test payer ${phone.slice(-1)}`, pin_hash: pinHash, created_at: now })
        .onConflict((oc) => oc.doNothing())
        .execute();
      await openAccount(tx, 'wallet', id, now);
    }
    await openAccount(tx, 'cash_in', CASH_IN_OWNER, now);
  });
}

/** Answers every pending payment of a test payer that has waited about a second. */
export async function answerForTestPayers(ctx: AppContext): Promise<void> {
  const due = await ctx.store.db
    .selectFrom('payments')
    .select(['id', 'payer_id', 'payer_phone'])
    .where('status', '=', 'pending')
    .where('payer_phone', 'in', ANSWERING)
    .where('created_at', '<=', ctx.now() - ANSWER_AFTER_MS)
    .limit(200)
    .execute();
  await Promise.all(
    due.map(async (payment) => {
      const answer = TEST_PAYERS[payment.payer_phone]?.answer;
      if (answer === undefined || answer === 'never' || !payment.payer_id) return;
      await settlePayment(ctx, payment.payer_id, payment.id, answer).catch(() => undefined); // lost a race: fine
    }),
  );
}
