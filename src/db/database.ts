import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, type QueryResult, type SqliteDatabase, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';
export type Tx = Kysely<Database>;

/**
 * The one handle every store uses. Reads go through `db` directly; every write goes through
 * `write()`, a unit of work that commits atomically. On SQLite, units that arrive together
 * are group-committed (see SqliteGroupCommit); on PostgreSQL each is its own transaction.
 */
export interface Db {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  /**
   * Runs `unit` in a transaction and resolves once it is durably committed.
   * A unit must only touch the database (no other awaits) and must not call write() itself.
   */
  write<T>(unit: (tx: Tx) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** PostgreSQL: connections per instance (DATABASE_POOL_SIZE). */
  poolSize?: number;
  /** Migrate only up to this migration (tests of upgrades); default all. */
  upTo?: string;
  /** Where a lost connection is reported (the service's log); default a process warning. */
  warn?: (message: string) => void;
}

/** Opens the database and brings its schema up to date; `migrationsApplied` names what that took. */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<Db & { migrationsApplied: string[] }> {
  // pg is loaded only when used: a SQLite process starts faster without it.
  const handle = url.startsWith('file:')
    ? openSqlite(url.slice('file:'.length))
    : openPostgres((await import('pg')).default, url, options.poolSize ?? 20, options.warn ?? ((message) => process.emitWarning(message)));
  return { ...handle, migrationsApplied: await migrate(handle.db, options.upTo) };
}

/**
 * A read whose rows the unit goes on to change on the strength of what it read: on
 * PostgreSQL `SELECT … FOR UPDATE`, so that a concurrent unit doing the same waits for this
 * one's commit (READ COMMITTED would let both read, then the later write undo the earlier).
 * SQLite runs one write transaction at a time, so its reads in a unit are already safe.
 */
export function lockedRead<Q extends { forUpdate(): Q }>(dialect: Dialect, query: Q): Q {
  return dialect === 'postgres' ? query.forUpdate() : query;
}

/**
 * lockedRead for a row whose key the unit does not change: `FOR NO KEY UPDATE`, which waits
 * for and holds off the same lock and any update of the row, but not the inserts of rows that
 * reference it (their foreign key's `FOR KEY SHARE`): a merchant's row held so stops none of
 * its payments from being created.
 */
export function lockedReadNoKey<Q extends { forNoKeyUpdate(): Q }>(dialect: Dialect, query: Q): Q {
  return dialect === 'postgres' ? query.forNoKeyUpdate() : query;
}

/**
 * The rows a worker claims (a lease it then sets): on PostgreSQL `SELECT … FOR UPDATE SKIP
 * LOCKED`, so that what it read is what it updates (not a version another instance has since
 * changed), and a row another session holds is left for a later round rather than waited
 * for, holding up every other row of the claim. SQLite: see lockedRead.
 */
export function claimingRead<Q extends { forUpdate(): Q; skipLocked(): Q }>(dialect: Dialect, query: Q): Q {
  return dialect === 'postgres' ? query.forUpdate().skipLocked() : query;
}

/** What each unit under way asked to do once it commits (null: nothing yet), by the handle it runs on. */
const commitEffects = new WeakMap<Tx, Array<() => void> | null>();

/**
 * Runs `effect` once the unit running on `tx` has committed: never if it rolls back, and once
 * even when the group commit runs the unit a second time. For what lives outside the
 * database and must match it (counters); an effect must not throw.
 */
export function onCommit(tx: Tx, effect: () => void): void {
  const effects = commitEffects.get(tx);
  if (effects === undefined) throw new Error('onCommit() outside a unit of work');
  if (effects === null) commitEffects.set(tx, [effect]);
  else effects.push(effect);
}

type Ran<T> = { value: T; effects: Array<() => void> | null };

/** Runs `unit` on `tx`, keeping what it asked to do on commit. */
function runUnit<T>(tx: Tx, unit: (tx: Tx) => Promise<T>): Promise<Ran<T>> {
  commitEffects.set(tx, null);
  const ran = (value: T): Ran<T> => {
    const effects = commitEffects.get(tx) ?? null;
    commitEffects.delete(tx);
    return { value, effects };
  };
  return unit(tx).then(ran, (error: unknown) => {
    commitEffects.delete(tx);
    throw error;
  });
}

function runEffects(effects: Array<() => void> | null): void {
  if (effects !== null) for (const effect of effects) effect();
}

/** The database answers but must not be relied on; the message says why and what to do. */
export class DatabaseNotReady extends Error {}

/** How long /ready waits for the database before it says the service is not ready. */
const PING_TIMEOUT_MS = 2000;

/** `select 1`, refused after PING_TIMEOUT_MS: a database that does not answer is not ready. */
async function ping(db: Kysely<Database>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS);
  });
  try {
    await Promise.race([sql`select 1`.execute(db), late]);
  } finally {
    clearTimeout(timer);
  }
}

export async function migrate(db: Kysely<Database>, upTo?: string): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = upTo === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(upTo);
  const newer = /previously executed migration (\S+) is missing/.exec(String((error as Error | undefined)?.message));
  if (newer)
    throw new Error(
      `the database was migrated by a newer version of Lipa (it has migration ${newer[1]}, which this version does not know): run that version or a newer one; nothing was changed`,
    );
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

function openSqlite(path: string): Db {
  if (path !== ':memory:') createPrivately(path);
  let sqlite: BetterSqlite3.Database;
  try {
    sqlite = new BetterSqlite3(path);
  } catch (error) {
    if (String((error as { code?: unknown }).code).startsWith('SQLITE_CANTOPEN'))
      throw new Error(
        `the database ${path} cannot be opened by this process (${(error as Error).message}): it needs to read and write the file and its directory`,
      );
    throw error;
  }
  try {
    // WAL for concurrent readers, synchronous=FULL so an acknowledged commit survives a power cut.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    // SQLite opens a file it may not write read-only without a word, and every write would
    // then fail: refuse to start instead.
    sqlite.exec('BEGIN IMMEDIATE');
    sqlite.exec('ROLLBACK');
  } catch (error) {
    sqlite.close();
    if (String((error as { code?: unknown }).code).startsWith('SQLITE_READONLY'))
      throw new Error(
        `the database ${path} is read-only to this process: it needs to write the file, its -wal and -shm files, and its directory`,
      );
    throw error;
  }
  const statements = withStatementCache(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: statements }) });
  // Outside a transaction, a hot read may run straight away; inside one it waits its turn.
  direct.set(db, (text, parameters) => (sqlite.inTransaction ? undefined : runStatement(statements.prepare(text), parameters)));
  const groupCommit = new SqliteGroupCommit(db, (conn) =>
    direct.set(conn, (text, parameters) => runStatement(statements.prepare(text), parameters)),
  );
  return {
    db,
    dialect: 'sqlite',
    write: (unit) => groupCommit.write(unit),
    ping: async () => {
      // SQLite keeps the write-ahead log open while it runs: a log deleted from under it (an
      // operator's mistake) still takes writes, but they reach the database only at a clean
      // stop, and a crash before that loses them.
      if (path !== ':memory:' && !existsSync(`${path}-wal`))
        throw new DatabaseNotReady(
          `The database's write-ahead log (${basename(path)}-wal) was deleted while the service runs: stop it with SIGTERM, which writes the log back into the database; a crash before that loses the writes since the last checkpoint.`,
        );
      await ping(db);
    },
    close: async () => {
      await groupCommit.drain();
      await db.destroy();
    },
  };
}

/**
 * A new database file is readable by its owner only (0600), and so its -wal and -shm files,
 * which SQLite creates with the database's permissions; a directory made for it is 0700. It
 * holds password hashes and sealed secrets: other users of the host have no business there.
 * An existing file keeps the permissions its operator gave it.
 */
function createPrivately(path: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, 'wx', 0o600));
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'EEXIST') return;
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
      throw new Error(
        `the database ${path} cannot be created by this process (${(error as Error).message}): it needs to write the file's directory`,
      );
    throw error;
  }
}

interface CachedStatements extends SqliteDatabase {
  prepare(text: string): BetterSqlite3.Statement;
}

/**
 * Kysely prepares every query anew; preparing costs more than running a small query. The
 * service issues a bounded set of distinct SQL texts, so statements are prepared once and
 * reused (better-sqlite3 is synchronous: a statement is never in use twice at once).
 */
function withStatementCache(sqlite: BetterSqlite3.Database): CachedStatements {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => sqlite.close(),
    prepare: (text: string) => {
      let statement = cache.get(text);
      if (!statement) {
        statement = sqlite.prepare(text);
        // Bounded: ad-hoc SQL (e.g. IN lists of varying length) must not grow it forever.
        if (cache.size >= 2000) cache.clear();
        cache.set(text, statement);
      }
      return statement;
    },
  };
}

/**
 * Runs a query on SQLite synchronously, without Kysely's executor (connection provider,
 * mutex, promise hops: several µs a query). Returns undefined when it may not run now.
 */
export type DirectRunner = (text: string, parameters: readonly unknown[]) => QueryResult<unknown> | undefined;

const direct = new WeakMap<Kysely<Database>, DirectRunner>();

/** What Kysely's SqliteConnection returns for the statement, computed the same way. */
function runStatement(statement: BetterSqlite3.Statement, parameters: readonly unknown[]): QueryResult<unknown> {
  if (statement.reader) return { rows: statement.all(parameters) };
  const { changes } = statement.run(parameters);
  return { numAffectedRows: BigInt(changes), rows: [] };
}

/**
 * Runs a compiled query through the direct runner when there is one and it may run now,
 * otherwise through Kysely. A synchronous failure becomes a rejection, as with Kysely.
 */
export function executeCompiled<R>(db: Kysely<Database>, query: CompiledQuery<R>): Promise<QueryResult<R>> {
  return executeText(db, query.sql, query.parameters, () => query);
}

/**
 * The same for SQL text and its parameters: the CompiledQuery that Kysely needs (frozen
 * objects, a few µs) is built only when the direct runner cannot take the query.
 */
export function executeText<R>(
  db: Kysely<Database>,
  text: string,
  parameters: readonly unknown[],
  compile: () => CompiledQuery<R> = () => CompiledQuery.raw(text, [...parameters]) as CompiledQuery<R>,
): Promise<QueryResult<R>> {
  const runner = direct.get(db);
  if (runner) {
    try {
      const result = runner(text, parameters);
      if (result) return Promise.resolve(result as QueryResult<R>);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return db.executeQuery(compile());
}

/** The group commit's own statements, compiled once (they run for every unit). */
const STATEMENTS = {
  begin: CompiledQuery.raw('begin immediate'),
  commit: CompiledQuery.raw('commit'),
  rollback: CompiledQuery.raw('rollback'),
  savepoint: CompiledQuery.raw('savepoint unit'),
  release: CompiledQuery.raw('release unit'),
  rollbackTo: CompiledQuery.raw('rollback to unit'),
};

interface PendingUnit {
  // biome-ignore lint/suspicious/noExplicitAny: each unit resolves to its own type
  run: (tx: Tx) => Promise<any>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for SQLite. better-sqlite3 blocks the event loop for every fsync, so one
 * transaction per request caps throughput at one fsync per request. Instead, units queued
 * during one turn of the event loop run in one `BEGIN IMMEDIATE … COMMIT`, and all are
 * answered after the single durable commit.
 *
 * A failing unit must roll back alone. Savepoints around every unit do that but cost about
 * a third of a small unit's SQLite time, so a batch first runs optimistically without them;
 * only if some unit throws is the batch rolled back and run again, each unit in its own
 * savepoint. Units only touch the database, so running one twice is safe: the first run
 * left nothing behind.
 */
class SqliteGroupCommit {
  private queue: PendingUnit[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly onConnection: (conn: Tx) => void,
  ) {}

  write<T>(run: (tx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (this.flushing === null) this.schedule();
    });
  }

  async drain(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
  }

  private schedule(): void {
    this.flushing = new Promise<void>((done) => {
      setImmediate(() => {
        void this.flush().finally(() => {
          this.flushing = null;
          if (this.queue.length > 0) this.schedule();
          done();
        });
      });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    let outcomes: Outcome[] = [];
    try {
      await this.db.connection().execute(async (conn) => {
        this.onConnection(conn);
        outcomes = await inTransaction(conn, async () => {
          const values: Outcome[] = [];
          for (const unit of batch) values.push({ ok: true, ...(await runUnit(conn, unit.run)) });
          return values;
        }).catch(async (error: unknown) => {
          // Alone in its batch, the unit's failure is its answer; otherwise find whose it was.
          if (batch.length === 1) return [{ ok: false, error }];
          return inTransaction(conn, async () => {
            const values: Outcome[] = [];
            for (const unit of batch) values.push(await runInSavepoint(conn, unit));
            return values;
          });
        });
      });
    } catch (error) {
      for (const unit of batch) unit.reject(error);
      return;
    }
    settle(batch, outcomes);
  }
}

function settle(batch: PendingUnit[], outcomes: Outcome[]): void {
  batch.forEach((unit, i) => {
    const outcome = outcomes[i];
    if (outcome?.ok) {
      runEffects(outcome.effects);
      unit.resolve(outcome.value);
    } else unit.reject(outcome?.error);
  });
}

type Outcome = ({ ok: true } & Ran<unknown>) | { ok: false; error: unknown };

/** BEGIN IMMEDIATE, `body`, COMMIT; ROLLBACK and rethrow if anything throws. */
async function inTransaction<T>(conn: Tx, body: () => Promise<T>): Promise<T> {
  await executeCompiled(conn, STATEMENTS.begin);
  try {
    const result = await body();
    await executeCompiled(conn, STATEMENTS.commit);
    return result;
  } catch (error) {
    await executeCompiled(conn, STATEMENTS.rollback).catch(() => undefined);
    throw error;
  }
}

async function runInSavepoint(conn: Tx, unit: PendingUnit): Promise<Outcome> {
  await executeCompiled(conn, STATEMENTS.savepoint);
  try {
    const ran = await runUnit(conn, unit.run);
    await executeCompiled(conn, STATEMENTS.release);
    return { ok: true, ...ran };
  } catch (error) {
    try {
      await executeCompiled(conn, STATEMENTS.rollbackTo);
      await executeCompiled(conn, STATEMENTS.release);
    } catch {
      // SQLite rolled the whole transaction back itself (it does on a full disk, an I/O
      // error, no memory): the savepoint is gone, and with it the batch. The unit's own error
      // is what went wrong, for every unit of the batch.
      throw error;
    }
    return { ok: false, error };
  }
}

/** pg returns int8 as strings; every int8 here (ms times, minor units) fits a JS number. */
const pgTypes = (driver: typeof pg) => ({
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === 20) {
      return (value: string) => {
        const n = Number(value);
        if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
        return n;
      };
    }
    return driver.types.getTypeParser(oid, format);
  }) as typeof pg.types.getTypeParser,
});

function openPostgres(driver: typeof pg, url: string, poolSize: number, warn: (message: string) => void): Db {
  const pool = new driver.Pool({
    connectionString: url,
    // No wait limit for a connection: recording an outcome (a message sent, a callback
    // delivered) must wait its turn rather than fail, or the work would be done twice.
    max: poolSize,
    types: pgTypes(driver),
  });
  // An idle connection that the server drops (restart, failover) must not crash the
  // process: the pool discards it and the next query opens a new one.
  pool.on('error', (err) => warn(`PostgreSQL idle connection lost: ${err.message}`));
  // Nor one that drops while checked out (between a transaction's statements): the pool
  // listens only to idle clients, and an 'error' event nobody listens to ends the process.
  // The statement under way fails (its unit with it) and the client is discarded on release.
  pool.on('connect', (client) => {
    client.on('error', (err) => warn(`PostgreSQL connection lost: ${err.message}`));
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  // Units under way when the store is closed still commit (or fail) before the pool ends.
  const running = new Set<Promise<unknown>>();
  const track = <T>(unit: Promise<T>): Promise<T> => {
    running.add(unit);
    const forget = () => running.delete(unit);
    void unit.then(forget, forget);
    return unit;
  };
  return {
    db,
    dialect: 'postgres',
    write: (unit) =>
      track(
        withRetry(async () => {
          const { value, effects } = await db.transaction().execute((trx) => runUnit(trx, unit));
          runEffects(effects);
          return value;
        }),
      ),
    ping: () => ping(db),
    close: async () => {
      await Promise.allSettled([...running]);
      await db.destroy();
    },
  };
}

/** Serialization failures and deadlocks are safe to retry: the transaction did nothing. */
async function withRetry<T>(attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (tries >= 3 || (code !== '40001' && code !== '40P01')) throw error;
    }
  }
}

/**
 * Whether an error says the database cannot be used just now (PostgreSQL down, restarting or
 * out of connections, a dropped connection; SQLite's disk full, its file read-only, an I/O
 * error, a lock held too long), rather than that the request or the code is wrong.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const e = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.startsWith('SQLITE_')) return /^SQLITE_(FULL|READONLY|IOERR|BUSY|CANTOPEN|NOLFS)/.test(code);
  // PostgreSQL SQLSTATE classes 08 (connection), 53 (insufficient resources: disk full, out of
  // memory, too many connections) and 57P (shutting down, restarting, cannot connect now).
  if (/^(08|53|57P)[0-9A-Z]{2,3}$/.test(code)) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /^(Connection terminated|Client has encountered a connection error)/.test(message);
}

/** True for a unique-constraint violation on either database. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * Serialises transactions about one phone number (a payment to it, its wallet's
 * registration) until commit. SQLite runs one write transaction at a time already;
 * PostgreSQL takes a transaction-scoped advisory lock.
 */
export async function lockPhone(store: Db, tx: Tx, phone: string): Promise<void> {
  if (store.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`phone:${phone}`}))`.execute(tx);
}
