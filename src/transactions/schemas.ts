import { Type } from 'typebox';
import { CursorParam, LimitParam, MAX_LIMIT, PageOf } from '../http/pagination.js';

export const TRANSACTION_TYPES = ['payment', 'refund', 'payout', 'settlement'] as const;
export type TransactionType = (typeof TRANSACTION_TYPES)[number];

const FROM = 'ISO 8601 instant with a zone (2026-12-01T00:00:00Z): entries at or after it';
const TO = 'ISO 8601 instant with a zone: entries before it';
const TYPE = `Only entries of this type: ${TRANSACTION_TYPES.join(', ')}`;

const typeSchema = Type.Union(
  TRANSACTION_TYPES.map((t) => Type.Literal(t)),
  { description: TYPE },
);

/** The range and type of a statement: the query of the bearer routes (the CSV too). */
export const StatementQuery = Type.Object({
  from: Type.Optional(Type.String({ maxLength: 64, description: FROM })),
  to: Type.Optional(Type.String({ maxLength: 64, description: TO })),
  type: Type.Optional(typeSchema),
});

export const TransactionsQuery = Type.Object({ ...StatementQuery.properties, limit: LimitParam, cursor: CursorParam });

/** The signed route's body: the same, in JSON. */
export const TransactionsBody = Type.Object({
  from: Type.Optional(Type.String({ maxLength: 64, description: FROM })),
  to: Type.Optional(Type.String({ maxLength: 64, description: TO })),
  type: Type.Optional(typeSchema),
  limit: Type.Optional(Type.Number({ description: `Entries a page holds: 1 to ${MAX_LIMIT}; default 100` })),
  cursor: CursorParam,
});

export const BalanceBody = Type.Object({}, { description: 'An empty object: {}' });

export const Balance = Type.Object({
  currency: Type.String(),
  available: Type.Number({ description: "The merchant's ledger balance, in major units" }),
  updatedAt: Type.String({ description: 'When the balance last moved (when the account was opened, if never)' }),
});

export const Transaction = Type.Object({
  transactionId: Type.String({ description: 'The ledger transaction' }),
  type: Type.String({ description: TRANSACTION_TYPES.join(', ') }),
  amount: Type.Number({ description: 'Major units, signed: + money in, − money out' }),
  currency: Type.String(),
  balanceAfter: Type.Number({ description: 'The balance this entry left, in major units' }),
  reference: Type.String({ description: "The payment's, refund's, payout's or settlement's identifier" }),
  orderId: Type.Optional(Type.String({ description: "The payment's orderId (payments and their refunds)" })),
  occurredAt: Type.String(),
});

export const TransactionPage = PageOf(Transaction);
