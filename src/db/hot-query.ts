import { type Compilable, CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import { type Db, defineOperation, executeCompiled } from './database.js';
import type { Database } from './schema.js';

const compiled = new Map<string, string>();

/** The SQL text of a hot query, compiled on first use (see hotQuery). */
function sqlOf(db: Kysely<Database>, name: string, params: readonly unknown[], build: () => Compilable<unknown>): string {
  const key = `${db.getExecutor().adapter.constructor.name}:${name}`;
  let text = compiled.get(key);
  if (text === undefined) {
    const query = build().compile();
    const same = query.parameters.length === params.length && query.parameters.every((p, i) => p === params[i]);
    if (!same) throw new Error(`hotQuery ${name}: parameters ${JSON.stringify(query.parameters)} are not ${JSON.stringify(params)}`);
    text = query.sql;
    compiled.set(key, text);
  }
  return text;
}

/**
 * Kysely builds and compiles every query anew (about 9 µs each); on the request hot path a
 * query of a fixed shape is compiled once and then only re-bound. `build` must produce the
 * query with exactly `params` as its parameters, in order: checked on first use, so a
 * mismatch fails loudly in the first test rather than binding the wrong values.
 */
export function hotQuery<R>(
  db: Kysely<Database>,
  name: string,
  params: readonly unknown[],
  build: () => Compilable<R>,
): Promise<QueryResult<R>> {
  const text = sqlOf(db, name, params, build);
  // On SQLite the statement runs synchronously on better-sqlite3 when it may.
  return executeCompiled(db, CompiledQuery.raw(text, [...params]) as CompiledQuery<R>);
}

/** One statement as an operation: a hot write with no logic around it. */
export const statementOperation = defineOperation(
  'db.statement',
  async (tx, args: { sql: string; parameters: readonly unknown[] }): Promise<QueryResult<unknown>> => {
    const { rows, numAffectedRows } = await executeCompiled(tx, CompiledQuery.raw(args.sql, [...args.parameters]));
    return { rows, numAffectedRows };
  },
);

/**
 * A hot query (see hotQuery) that writes, as a unit of work of its own: on SQLite it runs
 * on the writer thread, grouped with the others. `build` uses `store.db`.
 */
export function hotWrite<R>(store: Db, name: string, params: readonly unknown[], build: () => Compilable<R>): Promise<QueryResult<R>> {
  const sql = sqlOf(store.db, name, params, build);
  return store.run(statementOperation, { sql, parameters: params }) as Promise<QueryResult<R>>;
}
