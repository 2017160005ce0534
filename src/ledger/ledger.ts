import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import type { Database, LedgerAccountKind } from '../db/schema.js';
import { randomId } from '../security/tokens.js';
import { CURRENCY } from './money.js';

/**
 * A double-entry ledger. Every transaction is a set of postings that sum to zero; account
 * balances are updated in the same database transaction and checkLedger() proves they equal
 * the sum of their postings. Only the cash-in account (where deposited money enters the
 * system) may go below zero.
 */
export function accountId(kind: LedgerAccountKind, ownerId: string, currency = CURRENCY): string {
  return `acct_${kind}_${ownerId}_${currency}`;
}

export const CASH_IN_OWNER = 'system';

export async function openAccount(tx: Tx, kind: LedgerAccountKind, ownerId: string, now: number): Promise<string> {
  const id = accountId(kind, ownerId);
  await tx
    .insertInto('ledger_accounts')
    .values({ id, kind, owner_id: ownerId, currency: CURRENCY, balance: 0, created_at: now })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  return id;
}

export class InsufficientFundsError extends Error {
  constructor(readonly accountId: string) {
    super(`insufficient funds in ${accountId}`);
  }
}

export interface Posting {
  accountId: string;
  /** Minor units; positive credits the account, negative debits it. */
  amount: number;
}

/** Records one balanced transaction. Throws InsufficientFundsError if a debit would overdraw. */
export async function postTransaction(
  tx: Tx,
  entry: { kind: string; reference: string | null; postings: Posting[] },
  now: number,
): Promise<string> {
  const total = entry.postings.reduce((sum, p) => sum + p.amount, 0);
  if (total !== 0 || entry.postings.length < 2) throw new Error(`unbalanced ledger transaction (${total})`);
  // Balances first, debits before credits, each debit conditional on the balance covering
  // it: when the first debit fails nothing has been written, so a caller may catch
  // InsufficientFundsError and carry on in the same transaction.
  const ordered = [...entry.postings].sort((a, b) => a.amount - b.amount);
  for (const [index, posting] of ordered.entries()) {
    const result = await tx
      .updateTable('ledger_accounts')
      .set({ balance: sql`balance + ${posting.amount}` })
      .where('id', '=', posting.accountId)
      .where((eb) => eb.or([eb('kind', '=', 'cash_in'), eb('balance', '>=', -posting.amount)]))
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) {
      if (index === 0) throw new InsufficientFundsError(posting.accountId);
      // Earlier postings were applied: only a rollback of the whole unit is safe.
      throw new Error(`ledger: account ${posting.accountId} missing or overdrawn after partial postings`);
    }
  }
  const transactionId = randomId('ltx_');
  await tx
    .insertInto('ledger_transactions')
    .values({ id: transactionId, kind: entry.kind, reference: entry.reference, created_at: now })
    .execute();
  await tx
    .insertInto('ledger_postings')
    .values(
      entry.postings.map((posting) => ({
        id: randomId('lpo_'),
        transaction_id: transactionId,
        account_id: posting.accountId,
        amount: posting.amount,
        created_at: now,
      })),
    )
    .execute();
  return transactionId;
}

/** Cash-in: money enters the system from the cash-in account into a payer's wallet. */
export async function postDeposit(tx: Tx, payerId: string, amount: number, now: number): Promise<string> {
  const cashIn = await openAccount(tx, 'cash_in', CASH_IN_OWNER, now);
  return postTransaction(
    tx,
    {
      kind: 'deposit',
      reference: payerId,
      postings: [
        { accountId: cashIn, amount: -amount },
        { accountId: accountId('wallet', payerId), amount },
      ],
    },
    now,
  );
}

export async function balanceOf(db: Kysely<Database>, id: string): Promise<number | undefined> {
  const row = await db.selectFrom('ledger_accounts').select('balance').where('id', '=', id).executeTakeFirst();
  return row?.balance;
}

export interface LedgerCheck {
  /** Sum of every account balance: always 0 in double entry. */
  total: number;
  /** Accounts whose stored balance differs from the sum of their postings. */
  mismatched: string[];
  /** Non-cash-in accounts below zero. */
  negative: string[];
  /** Transactions whose postings do not sum to zero. */
  unbalanced: string[];
}

export async function checkLedger(db: Kysely<Database>): Promise<LedgerCheck> {
  const accounts = await db
    .selectFrom('ledger_accounts as a')
    .leftJoin('ledger_postings as p', 'p.account_id', 'a.id')
    .select(['a.id', 'a.kind', 'a.balance', sql<number>`coalesce(sum(p.amount), 0)`.as('posted')])
    .groupBy(['a.id', 'a.kind', 'a.balance'])
    .execute();
  const unbalanced = await db
    .selectFrom('ledger_postings')
    .select('transaction_id')
    .groupBy('transaction_id')
    .having(sql`sum(amount)`, '<>', 0)
    .execute();
  return {
    total: accounts.reduce((sum, a) => sum + Number(a.balance), 0),
    mismatched: accounts.filter((a) => Number(a.balance) !== Number(a.posted)).map((a) => a.id),
    negative: accounts.filter((a) => a.kind !== 'cash_in' && Number(a.balance) < 0).map((a) => a.id),
    unbalanced: unbalanced.map((u) => u.transaction_id),
  };
}
