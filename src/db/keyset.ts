import { type Expression, type SqlBool, sql } from 'kysely';
import type { Cursors, SortKey } from '../http/pagination.js';

/**
 * Keyset paging over (created_at, id), the order of every list of the API (http/pagination.ts):
 * a cursor carries the pair of the last row shown, and the next page is the rows strictly
 * beyond it.
 */

/** The shape of a (created_at, id) cursor. */
export const CREATED_KEY = ['number', 'string'] as const;

/** A row's place in a (created_at, id) list: what its cursor carries. */
export const createdKey = (row: { created_at: number; id: string }): SortKey => [row.created_at, row.id];

/** Where a list starts: after the row the cursor names, or at its beginning without one (422 for a cursor not of `scope`). */
export function startOf(cursors: Cursors, scope: string, cursor: string | undefined): SortKey | undefined {
  return cursor === undefined ? undefined : cursors.decode(scope, cursor, CREATED_KEY);
}

/**
 * Rows beyond `key` in (createdAt, id) order, `desc` (newest first) or `asc`. Written as
 * `created_at <= c and (created_at < c or id < i)` rather than the row value `(created_at, id) < (c, i)`:
 * both databases then read a range of an index that ends in created_at (SQLite uses a row value
 * only where the index holds both columns), and the id only breaks ties within one millisecond.
 */
export function beyond(createdAt: string, id: string, key: SortKey, direction: 'asc' | 'desc'): Expression<SqlBool> {
  const [at, last] = key;
  const strictly = sql.raw(direction === 'desc' ? '<' : '>');
  const orEqual = sql.raw(direction === 'desc' ? '<=' : '>=');
  return sql<SqlBool>`(${sql.ref(createdAt)} ${orEqual} ${at} and (${sql.ref(createdAt)} ${strictly} ${at} or ${sql.ref(id)} ${strictly} ${last}))`;
}
