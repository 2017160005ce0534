import { type Insertable, type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
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
  entry: { kind: string; reference: string | null; orderId?: string | null; postings: Posting[] },
  now: number,
): Promise<string> {
  const total = entry.postings.reduce((sum, p) => sum + p.amount, 0);
  if (total !== 0 || entry.postings.length < 2) throw new Error(`unbalanced ledger transaction (${total})`);
  // Balances first, debits before credits, each debit conditional on the balance covering
  // it: when the first debit fails nothing has been written, so a caller may catch
  // InsufficientFundsError and carry on in the same transaction. Each update also numbers
  // the account's next statement entry: the row is locked by the update, so the numbers
  // follow the order in which the balance moved, and balance_after is the balance it left.
  const ordered = [...entry.postings].sort((a, b) => a.amount - b.amount);
  // On PostgreSQL the accounts are locked first, in the order of their ids: a refund debits
  // the merchant and credits the wallet, a payment the other way, and two units that locked
  // them in their posting order could each hold the one the other waits for.
  if (tx.getExecutor().adapter instanceof PostgresAdapter) {
    const ids = [...new Set(entry.postings.map((p) => p.accountId))].sort();
    await hotQuery(tx, `ledger.lock-accounts-${ids.length}`, ids, () =>
      tx.selectFrom('ledger_accounts').select('id').where('id', 'in', ids).orderBy('id').forUpdate(),
    );
  }
  const moved: { posting: Posting; kind: LedgerAccountKind; balance: number; seq: number; at: number }[] = [];
  for (const [index, posting] of ordered.entries()) {
    const params = [posting.amount, now, now, posting.accountId, 'cash_in', -posting.amount];
    const { rows } = await hotQuery(tx, 'ledger.move-balance', params, () =>
      tx
        .updateTable('ledger_accounts')
        .set({
          balance: sql`balance + ${posting.amount}`,
          entries: sql`entries + 1`,
          // Never before the account's previous entry (whose unit may have taken a later time).
          last_entry_at: sql`case when last_entry_at > ${now} then last_entry_at else ${now} end`,
        })
        .where('id', '=', posting.accountId)
        .where((eb) => eb.or([eb('kind', '=', 'cash_in'), eb('balance', '>=', -posting.amount)]))
        .returning(['kind', 'balance', 'entries', 'last_entry_at']),
    );
    const row = rows[0];
    if (!row) {
      if (index === 0) throw new InsufficientFundsError(posting.accountId);
      // Earlier postings were applied: only a rollback of the whole unit is safe.
      throw new Error(`ledger: account ${posting.accountId} missing or overdrawn after partial postings`);
    }
    moved.push({ posting, kind: row.kind, balance: Number(row.balance), seq: Number(row.entries), at: Number(row.last_entry_at) });
  }
  const transactionId = randomId('ltx_');
  const transaction = { id: transactionId, kind: entry.kind, reference: entry.reference, created_at: now };
  await hotQuery(tx, 'ledger.insert-transaction', Object.values(transaction), () =>
    tx.insertInto('ledger_transactions').values(transaction),
  );
  const postings = entry.postings.map((posting) => ({
    id: randomId('lpo_'),
    transaction_id: transactionId,
    account_id: posting.accountId,
    amount: posting.amount,
    created_at: now,
  }));
  await insertRows(tx, 'ledger_postings', postings);
  // The statements of the accounts it touched (wallets, merchants, the settlement clearing
  // account). The cash-in account has none: it is the system's own other side of every
  // deposit, and no one asks for its statement.
  const entries = moved
    .filter((m) => m.kind !== 'cash_in')
    .map((m) => ({
      account_id: m.posting.accountId,
      seq: m.seq,
      transaction_id: transactionId,
      kind: entry.kind,
      amount: m.posting.amount,
      balance_after: m.balance,
      reference: entry.reference,
      order_id: entry.orderId ?? null,
      created_at: m.at,
    }));
  if (entries.length > 0) await insertRows(tx, 'ledger_entries', entries);
  return transactionId;
}

/** Rows of one shape in one INSERT, compiled once for each table and row count (hotQuery). */
function insertRows<T extends 'ledger_postings' | 'ledger_entries'>(tx: Tx, table: T, rows: Insertable<Database[T]>[]) {
  return hotQuery(
    tx,
    `ledger.insert-${table}-${rows.length}`,
    rows.flatMap((row) => Object.values(row)),
    () => tx.insertInto(table).values(rows as never),
  );
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
  /**
   * Accounts (but cash-in) whose statement (ledger_entries) disagrees with the account: not
   * one entry per posting numbered 1…n, a running balance that is not the sum of the amounts
   * before it, a last balance that is not the account's, or an entry dated before the one
   * before it.
   */
  statements: string[];
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
  const entries = await db
    .selectFrom('ledger_entries')
    .select(['account_id', 'seq', 'amount', 'balance_after', 'created_at'])
    .orderBy('account_id')
    .orderBy('seq')
    .execute();
  const statements = new Map<string, { count: number; balance: number; at: number; broken: boolean }>();
  for (const e of entries) {
    const s = statements.get(e.account_id) ?? { count: 0, balance: 0, at: 0, broken: false };
    s.count += 1;
    s.balance += Number(e.amount);
    if (Number(e.seq) !== s.count || Number(e.balance_after) !== s.balance || Number(e.created_at) < s.at) s.broken = true;
    s.at = Number(e.created_at);
    statements.set(e.account_id, s);
  }
  const postingsOf = await db
    .selectFrom('ledger_postings')
    .select(['account_id', sql<number>`count(*)`.as('count')])
    .groupBy('account_id')
    .execute();
  const postingCount = new Map(postingsOf.map((p) => [p.account_id, Number(p.count)]));
  const badStatements = accounts
    .filter((a) => a.kind !== 'cash_in')
    .filter((a) => {
      const s = statements.get(a.id) ?? { count: 0, balance: 0, at: 0, broken: false };
      return s.broken || s.count !== (postingCount.get(a.id) ?? 0) || s.balance !== Number(a.balance);
    })
    .map((a) => a.id);
  return {
    statements: badStatements,
    total: accounts.reduce((sum, a) => sum + Number(a.balance), 0),
    mismatched: accounts.filter((a) => Number(a.balance) !== Number(a.posted)).map((a) => a.id),
    negative: accounts.filter((a) => a.kind !== 'cash_in' && Number(a.balance) < 0).map((a) => a.id),
    unbalanced: unbalanced.map((u) => u.transaction_id),
  };
}
