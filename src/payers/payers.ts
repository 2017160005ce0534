import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { AppContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { isUniqueViolation, lockPhone } from '../db/database.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import type { Database } from '../db/schema.js';
import { AppError, assertText, FieldChecks, validationError } from '../http/errors.js';
import { limitOf, type PageQuery, type SortKey } from '../http/pagination.js';
import { isoTime } from '../http/time.js';
import { accountId, balanceOf, openAccount, postDeposit } from '../ledger/ledger.js';
import { CURRENCY, fromMinorUnits, MAX_DEPOSIT, toMinorUnits } from '../ledger/money.js';
import { movePayment } from '../payments/transitions.js';
import { hashPassword, pepperOf } from '../security/passwords.js';
import { paymentPrompt } from '../wallet/prompt.js';
import { testPayerOf } from '../wallet/staging-payers.js';

/**
 * A phone that registers while payments to it wait as no_user: they become pending
 * (CONTRACT §6), each with its callback event and a prompt to the new payer.
 */
async function claimWaitingPayments(ctx: AppContext, tx: Tx, payerId: string, phone: string, now: number): Promise<void> {
  const waiting = await tx
    .selectFrom('payments as p')
    .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
    .select(['p.id', 's.pos_company_name'])
    .where('p.payer_phone', '=', phone)
    .where('p.status', '=', 'no_user')
    .where('p.expires_at', '>', now)
    .execute();
  for (const payment of waiting) {
    const moved = await movePayment(tx, payment.id, { to: 'pending', payerId }, now);
    if (moved) await ctx.notifier.send(tx, paymentPrompt(moved, payment.pos_company_name), now);
  }
}

export interface NewPayer {
  phone: string;
  name: string;
  pin: string;
  balance?: number;
}

/**
 * Registers a mobile-money wallet: the payer, a ledger account, and the starting balance as
 * a deposit from the cash-in account, all in one transaction.
 */
export async function createPayer(ctx: AppContext, input: NewPayer) {
  const checks = new FieldChecks();
  // The wallet's phone is where its login codes and payment prompts go, as an SMS.
  checks.run(() => {
    // As an SMSC routes it: a known calling code, then the national number without its trunk 0.
    if (parsePhoneNumberFromString(`+${input.phone}`)?.number !== `+${input.phone}`)
      throw validationError('phone', 'must be the international number: calling code and national number, no trunk 0 (254712345678)');
  });
  checks.run(() => assertText('name', input.name, 'name'));
  checks.done();
  const opening = input.balance === undefined || input.balance === 0 ? 0 : toMinorUnits('balance', input.balance, MAX_DEPOSIT);
  const pinHash = await hashPassword(input.pin, pepperOf(ctx));
  const id = randomUUID();
  const now = ctx.now();
  try {
    await ctx.store.write(async (tx) => {
      await lockPhone(ctx.store, tx, input.phone);
      await tx.insertInto('payers').values({ id, phone: input.phone, name: input.name, pin_hash: pinHash, created_at: now }).execute();
      await openAccount(tx, 'wallet', id, now);
      if (opening > 0) await postDeposit(tx, id, opening, now);
      await claimWaitingPayments(ctx, tx, id, input.phone, now);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('phone_taken', `A wallet for ${input.phone} already exists.`);
    throw error;
  }
  return { payerId: id, phone: input.phone, balance: fromMinorUnits(opening) };
}

/** Cash-in: moves money from the cash-in account into the payer's wallet. */
export async function deposit(ctx: AppContext, phone: string, amount: number) {
  const minor = toMinorUnits('amount', amount, MAX_DEPOSIT);
  const payer = await ctx.store.db.selectFrom('payers').select('id').where('phone', '=', phone).executeTakeFirst();
  if (!payer) throw new AppError('not_found', `No wallet for ${phone}.`);
  if (testPayerOf(ctx, phone)?.money === 'none')
    throw new AppError(
      'test_payer_without_money',
      `Staging test payer ${phone} always has no money, to try a payment declined for insufficient funds; it takes no deposits.`,
    );
  const now = ctx.now();
  const wallet = accountId('wallet', payer.id);
  // The balance this deposit made, read in its own transaction: another deposit committed
  // meanwhile would otherwise show in this answer.
  const balance = await ctx.store.write(async (tx) => {
    await postDeposit(tx, payer.id, minor, now);
    return balanceOf(tx, wallet);
  });
  return { phone, balance: fromMinorUnits(balance ?? 0) };
}

/** A page of the payers with their wallet balance, newest first (the operator API and CLI). */
export async function listPayers(ctx: AppContext, query: PageQuery) {
  const scope = 'admin:payers';
  const limit = limitOf(query.limit);
  const rows = await payersQuery(ctx.store.db, limit + 1, startOf(ctx.cursors, scope, query.cursor)).execute();
  return ctx.cursors.page(scope, rows, limit, createdKey, (p) => ({
    payerId: p.id,
    phone: p.phone,
    name: p.name,
    balance: fromMinorUnits(Number(p.balance ?? 0)),
    currency: CURRENCY,
    createdAt: isoTime(p.created_at),
  }));
}

/** listPayers' query, walking payers_created newest first from beyond `after` (exported for the test of its plan). */
export function payersQuery(db: Kysely<Database>, limit: number, after?: SortKey) {
  let query = db
    .selectFrom('payers as p')
    .leftJoin('ledger_accounts as a', (join) =>
      join.onRef('a.owner_id', '=', 'p.id').on('a.kind', '=', 'wallet').on('a.currency', '=', CURRENCY),
    )
    .select(['p.id', 'p.phone', 'p.name', 'p.created_at', 'a.balance']);
  if (after !== undefined) query = query.where(beyond('p.created_at', 'p.id', after, 'desc'));
  return query.orderBy('p.created_at', 'desc').orderBy('p.id', 'desc').limit(limit);
}
