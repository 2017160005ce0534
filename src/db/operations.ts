import { createPaymentOperation, paymentStatusOperation, recordNonceOperation } from '../payments/operations.js';
import type { Operation } from './database.js';
import { statementOperation } from './hot-query.js';

/** Every operation the SQLite writer thread can run (Db.run), by name. */
// biome-ignore lint/suspicious/noExplicitAny: operations differ in their argument and result types
export const OPERATIONS: ReadonlyMap<string, Operation<any, any>> = new Map(
  [statementOperation, recordNonceOperation, createPaymentOperation, paymentStatusOperation].map((operation) => [
    operation.name,
    operation,
  ]),
);
