import type { Compilable, Kysely, QueryResult } from 'kysely';
import { executeText } from './database.js';
import type { Database } from './schema.js';

/** Per dialect (its adapter's class), each hot query's SQL text by name. */
const compiled = new Map<unknown, Map<string, string>>();

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
  const adapter = db.getExecutor().adapter;
  let texts = compiled.get(adapter.constructor);
  if (texts === undefined) {
    texts = new Map();
    compiled.set(adapter.constructor, texts);
  }
  let text = texts.get(name);
  if (text === undefined) {
    const query = build().compile();
    const same = query.parameters.length === params.length && query.parameters.every((p, i) => p === params[i]);
    if (!same) throw new Error(`hotQuery ${name}: parameters ${JSON.stringify(query.parameters)} are not ${JSON.stringify(params)}`);
    text = query.sql;
    texts.set(name, text);
  }
  // On SQLite the statement runs synchronously on better-sqlite3 when it may.
  return executeText<R>(db, text, params);
}
