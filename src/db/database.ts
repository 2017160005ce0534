import { mkdirSync } from 'node:fs';
import { dirname, extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, type QueryResult, type SqliteDatabase, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';
export type Tx = Kysely<Database>;

/**
 * A unit of work with a name and plain-data arguments, so that it can run in another
 * thread: on SQLite every operation runs on the writer thread (src/db/sqlite-writer.ts),
 * which must know it (src/db/operations.ts). `run` follows the rules of a unit (`Db.write`),
 * must not change `args`, and returns plain data (structured-cloneable).
 */
export interface Operation<A, R> {
  readonly name: string;
  run(tx: Tx, args: A, dialect: Dialect): Promise<R>;
}

export function defineOperation<A, R>(name: string, run: (tx: Tx, args: A, dialect: Dialect) => Promise<R>): Operation<A, R> {
  return { name, run };
}

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
  /**
   * Runs an operation as a unit of work and resolves once it is durably committed. On
   * SQLite it runs on the writer thread, so neither its statements nor the commit's fsync
   * hold up the event loop; the hot paths use it.
   */
  run<A, R>(operation: Operation<A, R>, args: A): Promise<R>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export async function openDatabase(url: string): Promise<Db> {
  if (!url.startsWith('file:')) {
    // Loaded only when used: the SQLite process and its writer thread start faster without it.
    const { default: driver } = await import('pg');
    const handle = openPostgres(driver, url);
    await migrate(handle.db);
    return handle;
  }
  const path = url.slice('file:'.length);
  const handle = openSqlite(path);
  // The writer thread loads its code while the migrations run, and opens the file after them.
  const writer = path === ':memory:' ? null : WriterThread.spawn();
  try {
    await migrate(handle.db);
    if (writer) handle.useWriter(await writer.open(path));
  } catch (error) {
    await writer?.stop();
    await handle.close();
    throw error;
  }
  return handle;
}

export async function migrate(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** One better-sqlite3 connection with the service's settings, and Kysely over it. */
export interface SqliteConnection {
  sqlite: BetterSqlite3.Database;
  statements: CachedStatements;
  db: Kysely<Database>;
}

export function openSqliteConnection(path: string): SqliteConnection {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  // WAL for concurrent readers, synchronous=FULL so an acknowledged commit survives a power cut.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const statements = withStatementCache(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: statements }) });
  return { sqlite, statements, db };
}

/** Inside a batch, every query of a unit runs straight on better-sqlite3. */
export function runUnitsDirectly(connection: SqliteConnection): (conn: Tx) => void {
  const { statements } = connection;
  return (conn) => direct.set(conn, (text, parameters) => runStatement(statements.prepare(text), parameters));
}

function openSqlite(path: string): Db & { useWriter(writer: WriterThread): void } {
  const connection = openSqliteConnection(path);
  const { sqlite, statements, db } = connection;
  // Outside a transaction, a hot read may run straight away; inside one it waits its turn.
  direct.set(db, (text, parameters) => (sqlite.inTransaction ? undefined : runStatement(statements.prepare(text), parameters)));
  const groupCommit = new SqliteGroupCommit(db, runUnitsDirectly(connection));
  return {
    db,
    dialect: 'sqlite',
    write: (unit) => groupCommit.write(unit),
    run: (operation, args) => groupCommit.run(operation, args),
    useWriter: (writer) => groupCommit.useWriter(writer),
    ping: async () => {
      groupCommit.assertWriterAlive();
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await groupCommit.drain();
      await groupCommit.stopWriter();
      await db.destroy();
    },
  };
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
  const runner = direct.get(db);
  if (runner) {
    try {
      const result = runner(query.sql, query.parameters);
      if (result) return Promise.resolve(result as QueryResult<R>);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return db.executeQuery(query);
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

/** Queued operations go to the writer at the end of the event loop's turn, or once this many wait. */
const EAGER_BATCH = 16;

interface PendingUnit {
  // biome-ignore lint/suspicious/noExplicitAny: each unit resolves to its own type
  run: (tx: Tx) => Promise<any>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

interface PendingOperation {
  call: OperationCall;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** An operation as the writer thread receives it. */
export interface OperationCall {
  name: string;
  args: unknown;
}

/**
 * Group commit for SQLite. better-sqlite3 blocks its thread for every fsync, so one
 * transaction per request caps throughput at one fsync per request. Instead, units queued
 * during one turn of the event loop run in one `BEGIN IMMEDIATE … COMMIT`, and all are
 * answered after the single durable commit.
 *
 * Operations (`Db.run`, the hot paths) run on the writer thread, which has its own
 * connection: while it executes and fsyncs a batch, the event loop goes on serving
 * requests and sends it the next operations, which it commits together in its next
 * transaction. Closures (`Db.write`) run on this thread's connection. The two never write
 * at once: closures run only when no operation is in flight, and no operation is sent
 * while closures run, so neither connection ever waits on the other's lock.
 */
class SqliteGroupCommit {
  private queue: PendingUnit[] = [];
  private operations: PendingOperation[] = [];
  private flushing: Promise<void> | null = null;
  private writer: WriterThread | null = null;
  private runningHere = false;
  /** Batches of operations sent to the writer and not yet answered. */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly onConnection: (conn: Tx) => void,
  ) {}

  useWriter(writer: WriterThread): void {
    this.writer = writer;
  }

  async stopWriter(): Promise<void> {
    await this.writer?.stop();
  }

  assertWriterAlive(): void {
    if (this.writer?.failure) throw this.writer.failure;
  }

  write<T>(run: (tx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (this.flushing === null) this.schedule();
    });
  }

  run<A, R>(operation: Operation<A, R>, args: A): Promise<R> {
    // Without a writer thread (an in-memory database), an operation is a unit like any other.
    if (this.writer === null) return this.write((tx) => operation.run(tx, args, 'sqlite'));
    return new Promise<R>((resolve, reject) => {
      this.operations.push({ call: { name: operation.name, args }, resolve: resolve as (value: unknown) => void, reject });
      // Enough for a batch: the writer can start on it while this thread parses the next requests.
      if (this.operations.length >= EAGER_BATCH && !this.runningHere) this.sendOperations();
      else if (this.flushing === null) this.schedule();
    });
  }

  async drain(): Promise<void> {
    while (this.flushing !== null || this.inFlight.size > 0) {
      await this.flushing;
      await Promise.all(this.inFlight);
    }
  }

  private schedule(): void {
    this.flushing = new Promise<void>((done) => {
      setImmediate(() => {
        void this.flush().finally(() => {
          this.flushing = null;
          if (this.queue.length > 0 || this.operations.length > 0) this.schedule();
          done();
        });
      });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    if (batch.length > 0) {
      this.runningHere = true;
      try {
        // The writer's connection must be idle before this one writes.
        while (this.inFlight.size > 0) await Promise.all(this.inFlight);
        await this.runHere(batch);
      } finally {
        this.runningHere = false;
      }
    }
    this.sendOperations();
  }

  private sendOperations(): void {
    const operations = this.operations;
    this.operations = [];
    if (operations.length > 0 && this.writer) {
      // Not awaited: the next flush may send more while the writer commits these.
      const sent: Promise<void> = this.writer.runBatch(operations.map((o) => o.call)).then(
        (outcomes) => settle(operations, outcomes),
        (error: unknown) => {
          for (const operation of operations) operation.reject(error);
        },
      );
      this.inFlight.add(sent);
      void sent.finally(() => this.inFlight.delete(sent));
    }
  }

  private async runHere(batch: PendingUnit[]): Promise<void> {
    try {
      let outcomes: Outcome[] = [];
      await this.db.connection().execute(async (conn) => {
        this.onConnection(conn);
        outcomes = await runBatch(
          conn,
          batch.map((unit) => unit.run),
        );
      });
      settle(batch, outcomes);
    } catch (error) {
      for (const unit of batch) unit.reject(error);
    }
  }
}

function settle(batch: { resolve: (value: unknown) => void; reject: (error: unknown) => void }[], outcomes: Outcome[]): void {
  batch.forEach((unit, i) => {
    const outcome = outcomes[i];
    if (outcome?.ok) unit.resolve(outcome.value);
    else unit.reject(outcome?.error);
  });
}

export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs units in one transaction and commits once; the outcome of each, in order. A failing
 * unit must roll back alone. Savepoints around every unit do that but cost about a third
 * of a small unit's SQLite time, so a batch first runs optimistically without them; only
 * if some unit throws is the batch rolled back and run again, each unit in its own
 * savepoint. Units only touch the database, so running one twice is safe: the first run
 * left nothing behind. Throws only when the transaction itself fails (nothing committed).
 */
export async function runBatch(conn: Tx, units: readonly ((tx: Tx) => Promise<unknown>)[]): Promise<Outcome[]> {
  return inTransaction(conn, async () => {
    const values: Outcome[] = [];
    for (const unit of units) values.push({ ok: true, value: await unit(conn) });
    return values;
  }).catch(async (error: unknown) => {
    // Alone in its batch, the unit's failure is its answer; otherwise find whose it was.
    if (units.length === 1) return [{ ok: false, error }];
    return inTransaction(conn, async () => {
      const values: Outcome[] = [];
      for (const unit of units) values.push(await runInSavepoint(conn, unit));
      return values;
    });
  });
}

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

async function runInSavepoint(conn: Tx, unit: (tx: Tx) => Promise<unknown>): Promise<Outcome> {
  await executeCompiled(conn, STATEMENTS.savepoint);
  try {
    const value = await unit(conn);
    await executeCompiled(conn, STATEMENTS.release);
    return { ok: true, value };
  } catch (error) {
    await executeCompiled(conn, STATEMENTS.rollbackTo);
    await executeCompiled(conn, STATEMENTS.release);
    return { ok: false, error };
  }
}

/** What crosses the thread boundary: errors lose their class but keep what callers test. */
export type WireOutcome = { ok: true; value: unknown } | { ok: false; error: WireError };
export interface WireError {
  name: string;
  message: string;
  code?: string;
}

export function toWire(outcome: Outcome): WireOutcome {
  return outcome.ok ? outcome : { ok: false, error: errorToWire(outcome.error) };
}

export function errorToWire(error: unknown): WireError {
  const { name, message, code } =
    error instanceof Error ? (error as Error & { code?: unknown }) : { name: 'Error', message: String(error), code: undefined };
  return typeof code === 'string' ? { name, message, code } : { name, message };
}

function errorFromWire(wire: WireError): Error {
  return Object.assign(new Error(wire.message), wire);
}

/** Messages between this thread and the writer. */
export type WriterRequest = { type: 'open'; path: string } | { type: 'batch'; id: number; calls: OperationCall[] } | { type: 'stop' };
export type WriterReply =
  | { type: 'ready' }
  | { type: 'outcomes'; id: number; outcomes: WireOutcome[] }
  | { type: 'failed'; id: number; error: WireError };

/**
 * The writer thread from this side. Batches are answered by id; the thread may commit
 * several together. If it dies, every call fails from then on and health checks report it.
 */
class WriterThread {
  failure: Error | null = null;
  private readonly pending = new Map<number, { resolve: (outcomes: Outcome[]) => void; reject: (error: unknown) => void }>();
  private nextId = 1;

  private stopping = false;
  private opening: { resolve: () => void; reject: (error: unknown) => void } | null = null;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (reply: WriterReply) => {
      if (reply.type === 'ready') return this.opening?.resolve();
      if (reply.type === 'failed' && reply.id === 0) return this.opening?.reject(errorFromWire(reply.error));
      const pending = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      if (reply.type === 'outcomes') pending?.resolve(reply.outcomes.map((o) => (o.ok ? o : { ok: false, error: errorFromWire(o.error) })));
      else pending?.reject(errorFromWire(reply.error));
    });
    worker.on('error', (error) => this.fail(error));
    worker.on('exit', (code) => this.fail(new Error(`the SQLite writer thread exited (code ${code})`)));
  }

  /** Starts the thread; it loads its code, then waits to be told which file to open. */
  static spawn(): WriterThread {
    // The same kind of file as this module: .js when built, .ts when run from source, which
    // the thread can only load with tsx, the loader the source runs under (tests, `npm run dev`).
    const extension = extname(fileURLToPath(import.meta.url));
    const entry = new URL(`./sqlite-writer${extension}`, import.meta.url);
    const worker =
      extension === '.ts'
        ? new Worker(`import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`, {
            eval: true,
          })
        : new Worker(entry);
    return new WriterThread(worker);
  }

  /** Opens the database file on the thread; resolves when it is ready for batches. */
  open(path: string): Promise<WriterThread> {
    return new Promise<WriterThread>((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      this.opening = { resolve: () => resolve(this), reject };
      this.worker.postMessage({ type: 'open', path } satisfies WriterRequest);
    });
  }

  runBatch(calls: OperationCall[]): Promise<Outcome[]> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Outcome[]>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'batch', id, calls } satisfies WriterRequest);
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.failure) return;
    const exited = new Promise((resolve) => this.worker.once('exit', resolve));
    this.worker.postMessage({ type: 'stop' } satisfies WriterRequest);
    await exited;
  }

  private fail(error: Error): void {
    if (this.failure === null && !this.stopping) process.emitWarning(`The SQLite writer thread failed: ${error.message}`);
    this.failure ??= error;
    this.opening?.reject(error);
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
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

function openPostgres(driver: typeof pg, url: string): Db {
  const pool = new driver.Pool({ connectionString: url, max: 20, types: pgTypes(driver) });
  // An idle connection that the server drops (restart, failover) must not crash the
  // process: the pool discards it and the next query opens a new one.
  pool.on('error', (err) => process.emitWarning(`PostgreSQL idle connection lost: ${err.message}`));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  // Units under way when the store is closed still commit (or fail) before the pool ends.
  const running = new Set<Promise<unknown>>();
  const track = <T>(unit: Promise<T>): Promise<T> => {
    running.add(unit);
    void unit.then(
      () => running.delete(unit),
      () => running.delete(unit),
    );
    return unit;
  };
  return {
    db,
    dialect: 'postgres',
    write: (unit) => track(withRetry(() => db.transaction().execute(unit))),
    run: (operation, args) => track(withRetry(() => db.transaction().execute((tx) => operation.run(tx, args, 'postgres')))),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
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
export async function lockPhone(dialect: Dialect, tx: Tx, phone: string): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`phone:${phone}`}))`.execute(tx);
}
