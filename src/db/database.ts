import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, type SqliteDatabase, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
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

export async function openDatabase(url: string): Promise<Db> {
  const handle = url.startsWith('file:') ? openSqlite(url.slice('file:'.length)) : openPostgres(url);
  await migrate(handle.db);
  return handle;
}

export async function migrate(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

function openSqlite(path: string): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  // WAL for concurrent readers, synchronous=FULL so an acknowledged commit survives a power cut.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  const groupCommit = new SqliteGroupCommit(db);
  return {
    db,
    dialect: 'sqlite',
    write: (unit) => groupCommit.write(unit),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await groupCommit.drain();
      await db.destroy();
    },
  };
}

/**
 * Kysely prepares every query anew; preparing costs more than running a small query. The
 * service issues a bounded set of distinct SQL texts, so statements are prepared once and
 * reused (better-sqlite3 is synchronous: a statement is never in use twice at once).
 */
function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
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
 * during one turn of the event loop run in one `BEGIN IMMEDIATE … COMMIT`, each inside its
 * own savepoint so that a failing unit rolls back alone, and all are answered after the
 * single durable commit.
 */
class SqliteGroupCommit {
  private queue: PendingUnit[] = [];
  private flushing: Promise<void> | null = null;

  constructor(private readonly db: Kysely<Database>) {}

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
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    try {
      await this.db.connection().execute(async (conn) => {
        await conn.executeQuery(STATEMENTS.begin);
        try {
          for (const unit of batch) outcomes.push(await runInSavepoint(conn, unit, batch.length > 1));
          await conn.executeQuery(STATEMENTS.commit);
        } catch (error) {
          await conn.executeQuery(STATEMENTS.rollback).catch(() => undefined);
          throw error;
        }
      });
    } catch (error) {
      for (const unit of batch) unit.reject(error);
      return;
    }
    batch.forEach((unit, i) => {
      const outcome = outcomes[i];
      if (outcome?.ok) unit.resolve(outcome.value);
      else unit.reject(outcome?.error);
    });
  }
}

async function runInSavepoint(
  conn: Tx,
  unit: PendingUnit,
  useSavepoint: boolean,
): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
  if (!useSavepoint) {
    // Alone in its batch: a failure aborts the whole (single-unit) transaction.
    return { ok: true, value: await unit.run(conn) };
  }
  await conn.executeQuery(STATEMENTS.savepoint);
  try {
    const value = await unit.run(conn);
    await conn.executeQuery(STATEMENTS.release);
    return { ok: true, value };
  } catch (error) {
    await conn.executeQuery(STATEMENTS.rollbackTo);
    await conn.executeQuery(STATEMENTS.release);
    return { ok: false, error };
  }
}

/** pg returns int8 as strings; every int8 here (ms times, minor units) fits a JS number. */
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === 20) {
      return (value: string) => {
        const n = Number(value);
        if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
        return n;
      };
    }
    return pg.types.getTypeParser(oid, format);
  }) as typeof pg.types.getTypeParser,
};

function openPostgres(url: string): Db {
  const pool = new pg.Pool({ connectionString: url, max: 20, types: pgTypes });
  // An idle connection that the server drops (restart, failover) must not crash the
  // process: the pool discards it and the next query opens a new one.
  pool.on('error', (err) => process.emitWarning(`PostgreSQL idle connection lost: ${err.message}`));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    write: (unit) => withRetry(() => db.transaction().execute(unit)),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => db.destroy(),
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
export async function lockPhone(store: Db, tx: Tx, phone: string): Promise<void> {
  if (store.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`phone:${phone}`}))`.execute(tx);
}
