import type { AppContext } from '../context.js';
import { hotQuery } from '../db/hot-query.js';
import type { LedgerEntryTable } from '../db/schema.js';
import { validationError } from '../http/errors.js';
import type { Page } from '../http/pagination.js';
import { isoTime, parseInstant } from '../http/time.js';
import { accountId } from '../ledger/ledger.js';
import { CURRENCY, fromMinorUnits } from '../ledger/money.js';
import type { TransactionType } from './schemas.js';

/**
 * A merchant's balance and statement (CONTRACT §12), read from its account's ledger entries.
 * Entries are numbered per account in the order the balance moved (ledger.ts), so a range is
 * a run of consecutive numbers: pages and the CSV walk the numbers, never an offset, and for
 * any range the balance before its first entry plus its amounts is its last balanceAfter.
 */

export interface StatementFilter {
  from?: string | undefined;
  to?: string | undefined;
  type?: TransactionType | undefined;
}

type Entry = Pick<
  LedgerEntryTable,
  'seq' | 'transaction_id' | 'kind' | 'amount' | 'balance_after' | 'reference' | 'order_id' | 'created_at'
>;

const ENTRY_COLUMNS = ['seq', 'transaction_id', 'kind', 'amount', 'balance_after', 'reference', 'order_id', 'created_at'] as const;

export async function merchantBalance(ctx: AppContext, merchantId: string) {
  const db = ctx.store.db;
  const account = await db
    .selectFrom('ledger_accounts as a')
    .leftJoin('ledger_entries as e', (join) => join.onRef('e.account_id', '=', 'a.id').onRef('e.seq', '=', 'a.entries'))
    .select(['a.balance', 'a.currency', 'a.created_at', 'e.created_at as moved_at'])
    .where('a.id', '=', accountId('merchant', merchantId))
    .executeTakeFirst();
  return {
    currency: account?.currency ?? CURRENCY,
    available: fromMinorUnits(Number(account?.balance ?? 0)),
    updatedAt: isoTime(Number(account?.moved_at ?? account?.created_at ?? 0)),
  };
}

/**
 * The entry numbers a range covers, [first, last]; null when it holds none. Without `to`, an
 * open end (`last` unbounded, no query) when the caller reads downwards from it anyway.
 */
async function seqRange(ctx: AppContext, account: string, filter: StatementFilter, openEnd = false): Promise<[number, number] | null> {
  const from = instant('from', filter.from);
  const to = instant('to', filter.to);
  const db = ctx.store.db;
  const bound = async (direction: 'asc' | 'desc', where: (q: ReturnType<typeof base>) => ReturnType<typeof base>) => {
    const row = await where(base()).orderBy('created_at', direction).orderBy('seq', direction).limit(1).executeTakeFirst();
    return row === undefined ? null : Number(row.seq);
  };
  const base = () => db.selectFrom('ledger_entries').select('seq').where('account_id', '=', account);
  const first = from === undefined ? 1 : await bound('asc', (q) => q.where('created_at', '>=', from));
  const last =
    to === undefined
      ? openEnd
        ? Number.MAX_SAFE_INTEGER
        : await bound('desc', (q) => q)
      : await bound('desc', (q) => q.where('created_at', '<', to));
  if (first === null || last === null || first > last) return null;
  return [first, last];
}

function instant(field: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseInstant(value);
  if (ms === undefined) throw validationError(field, 'must be an ISO 8601 instant with a time zone, e.g. 2026-12-01T00:00:00Z');
  return ms;
}

/** One page of the statement, newest first. */
export async function listTransactions(
  ctx: AppContext,
  merchantId: string,
  filter: StatementFilter & { limit: number; cursor?: string | undefined },
): Promise<Page<ReturnType<typeof toTransaction>>> {
  const scope = `transactions:${merchantId}`;
  const after = filter.cursor === undefined ? undefined : Number(ctx.cursors.decode(scope, filter.cursor, ['number'])[0]);
  const account = accountId('merchant', merchantId);
  const range = await seqRange(ctx, account, filter, true);
  if (range === null) return { data: [], nextCursor: null };
  const last = after === undefined ? range[1] : Math.min(range[1], after - 1);
  const db = ctx.store.db;
  const type = filter.type;
  const params = [account, range[0], last, ...(type === undefined ? [] : [type]), filter.limit + 1];
  const { rows } = await hotQuery(db, type === undefined ? 'statement.page' : 'statement.page-of-type', params, () => {
    const query = db
      .selectFrom('ledger_entries')
      .select(ENTRY_COLUMNS)
      .where('account_id', '=', account)
      .where('seq', '>=', range[0])
      .where('seq', '<=', last);
    return (type === undefined ? query : query.where('kind', '=', type)).orderBy('seq', 'desc').limit(filter.limit + 1);
  });
  return ctx.cursors.page(scope, rows, filter.limit, (row) => [Number(row.seq)], toTransaction);
}

/** The whole range, oldest first, a chunk of entries at a time: the CSV export reads it as it writes. */
export async function* statementChunks(ctx: AppContext, merchantId: string, filter: StatementFilter, chunk = 1000) {
  const account = accountId('merchant', merchantId);
  const range = await seqRange(ctx, account, filter);
  if (range === null) return;
  for (let next = range[0]; next <= range[1]; ) {
    let query = ctx.store.db
      .selectFrom('ledger_entries')
      .select(ENTRY_COLUMNS)
      .where('account_id', '=', account)
      .where('seq', '>=', next)
      .where('seq', '<=', Math.min(range[1], next + chunk - 1));
    if (filter.type !== undefined) query = query.where('kind', '=', filter.type);
    const rows = await query.orderBy('seq', 'asc').execute();
    if (rows.length > 0) yield rows.map(toTransaction);
    next += chunk;
  }
}

export function toTransaction(e: Entry) {
  return {
    transactionId: e.transaction_id,
    type: e.kind,
    amount: fromMinorUnits(Number(e.amount)),
    currency: CURRENCY,
    balanceAfter: fromMinorUnits(Number(e.balance_after)),
    reference: e.reference ?? '',
    ...(e.order_id === null ? {} : { orderId: e.order_id }),
    occurredAt: isoTime(Number(e.created_at)),
  };
}

export const CSV_COLUMNS = ['transactionId', 'type', 'amount', 'currency', 'balanceAfter', 'reference', 'orderId', 'occurredAt'] as const;

/** One RFC 4180 line (CRLF): fields with a comma, quote or line break quoted, quotes doubled. */
export function csvLine(values: readonly (string | number | undefined)[]): string {
  let line = '';
  for (const [i, v] of values.entries()) {
    const text = v === undefined ? '' : String(v);
    line += (i === 0 ? '' : ',') + (NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text);
  }
  return `${line}\r\n`;
}

const NEEDS_QUOTES = /[",\r\n]/;

/**
 * A text the merchant's own client chose (an orderId), as a spreadsheet will not run it: one
 * that starts with = + - @ or a tab or carriage return gets a leading apostrophe (OWASP's
 * advice against CSV injection), since whoever opens the export may not be who wrote it.
 */
export function inertCell(text: string | undefined): string | undefined {
  return text !== undefined && /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
}
