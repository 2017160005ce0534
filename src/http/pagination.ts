import { createHmac, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';
import { deriveKey } from '../security/secret-box.js';
import { validationError } from './errors.js';
import { patternString } from './schemas.js';

/**
 * Keyset paging, one way for every list of the API (CONTRACT §12): `limit` and an opaque
 * `cursor` in, `{data, nextCursor}` out. A cursor names the last row of the page it ended
 * (its sort key), so the next page starts strictly after it: rows written meanwhile neither
 * repeat nor push others out of the walk. A cursor is signed with a key derived from the
 * master key and bound to its list and owner, so an edited cursor, or one of another list or
 * another merchant, is refused (422) rather than read.
 */

export const MAX_LIMIT = 500;
export const DEFAULT_LIMIT = 100;
const LIMIT_SAYS = `must be a whole number from 1 to ${MAX_LIMIT}`;
const CURSOR_SAYS = 'is not a cursor this list gave out: pass nextCursor from the previous page unchanged';

/** The `limit` query parameter of the list endpoints: 1 to 500, default 100 (422 outside). */
export const LimitParam = Type.Optional(
  patternString('^[0-9]{1,3}$', LIMIT_SAYS, {
    description: `How many rows a page holds: 1 to ${MAX_LIMIT}; default ${DEFAULT_LIMIT}`,
  }),
);

/** The `cursor` query parameter: `nextCursor` of the previous page. */
export const CursorParam = Type.Optional(
  Type.String({ minLength: 1, maxLength: 1024, description: 'nextCursor of the previous page, as it came; absent for the first page' }),
);

/** An answer's page: `nextCursor` is null on the last one. */
export function PageOf<T extends Parameters<typeof Type.Array>[0]>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last page' }),
  });
}

/** The paging parameters of a list's query string, as they came. */
export interface PageQuery {
  limit?: string | undefined;
  cursor?: string | undefined;
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

export function limitOf(value: string | number | undefined): number {
  if (value === undefined) return DEFAULT_LIMIT;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw validationError('limit', LIMIT_SAYS);
  return limit;
}

/** A sort key: the values of the ORDER BY columns of one row, in order. */
export type SortKey = readonly (string | number)[];

/**
 * The cursors of one list. `scope` names the list and the owner whose rows it shows (a
 * merchant's id, `admin`): a cursor made for one scope is refused by every other.
 */
export class Cursors {
  private readonly key: Buffer;

  constructor(masterKey: Buffer) {
    this.key = deriveKey(masterKey, 'paging-cursor');
  }

  encode(scope: string, sortKey: SortKey): string {
    const body = Buffer.from(JSON.stringify(sortKey)).toString('base64url');
    return `${body}.${this.tag(scope, body)}`;
  }

  /** The sort key a cursor carries; 422 naming `cursor` for anything this scope did not make. */
  decode(scope: string, cursor: string, shape: readonly ('string' | 'number')[]): SortKey {
    const [body, tag, extra] = cursor.split('.');
    if (body === undefined || tag === undefined || extra !== undefined) throw badCursor();
    const expected = Buffer.from(this.tag(scope, body));
    const given = Buffer.from(tag);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw badCursor();
    let key: unknown;
    try {
      key = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw badCursor();
    }
    // Signed by us, so well-formed; checked all the same, as cheap insurance against a key change.
    if (!Array.isArray(key) || key.length !== shape.length || key.some((v, i) => typeof v !== shape[i])) throw badCursor();
    return key as SortKey;
  }

  /** The page of `rows` (fetched with limit + 1 to tell whether another follows) and its cursor. */
  page<Row, T>(scope: string, rows: Row[], limit: number, sortKey: (row: Row) => SortKey, view: (row: Row) => T): Page<T> {
    const more = rows.length > limit;
    const shown = more ? rows.slice(0, limit) : rows;
    const last = shown[shown.length - 1];
    return { data: shown.map(view), nextCursor: more && last !== undefined ? this.encode(scope, sortKey(last)) : null };
  }

  private tag(scope: string, body: string): string {
    return createHmac('sha256', this.key).update(`${scope}\n${body}`).digest('base64url').slice(0, 22);
  }
}

const badCursor = () => validationError('cursor', CURSOR_SAYS);
