import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import pg from 'pg';
import { buildApp, buildMockApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type AppContext, createContext } from '../../src/context.js';
import { type Db, openDatabase } from '../../src/db/database.js';
import type { App } from '../../src/http/types.js';
import { startBackground } from '../../src/jobs/background.js';
import { createLogger } from '../../src/logger.js';
import { createTransports } from '../../src/messaging/transports/index.js';
import { forgetOpenApi, type OpenApiDocument, registerOpenApi } from './openapi-check.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';
export const STAGING_OTP = '534789';

/** The database the suite runs on: `sqlite`, or a PostgreSQL server URL (scripts/test.mjs). */
export const TEST_DATABASE = process.env.LIPA_TEST_DATABASE ?? 'sqlite';
export const ON_POSTGRES = TEST_DATABASE.startsWith('postgres');

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * For a suite of tests of the store itself: a fresh database opened as the service opens it
 * (migrated), before the suite's tests; closed and dropped after them.
 */
export function storeForSuite(): { readonly store: Db; readonly database: TestDatabase } {
  const suite = {} as { store: Db; database: TestDatabase };
  before(async () => {
    suite.database = await freshDatabase();
    suite.store = await openDatabase(suite.database.url);
  });
  after(async () => {
    await suite.store.close();
    await suite.database.drop();
  });
  return suite;
}

/** A fresh, empty database: a SQLite file in a temp dir, or a new PostgreSQL database. */
export async function freshDatabase(): Promise<TestDatabase> {
  if (!ON_POSTGRES) {
    const dir = mkdtempSync(join(tmpdir(), 'lipa-test-'));
    return { url: `file:${join(dir, 'lipa.sqlite')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `lipa_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(TEST_DATABASE);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: TEST_DATABASE });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

export interface Lipa {
  url: string;
  /** The mock environment listener (endpoints 1-2 for payers). */
  mockUrl: string;
  ctx: AppContext;
  /** Every log line the service wrote, as JSON text. */
  logs: string[];
  databaseUrl: string;
  close(): Promise<void>;
}

/**
 * Starts the real service in this process, listening on 127.0.0.1 with ephemeral ports,
 * on a fresh database. `env` overrides the service's environment (CONTRACT §1).
 */
export async function startLipa(env: Record<string, string> = {}, options: { expirySweep?: boolean } = {}): Promise<Lipa> {
  const database = env.DATABASE_URL ? { url: env.DATABASE_URL, drop: async () => undefined } : await freshDatabase();
  const config = loadConfig({ ADMIN_TOKEN, LOG_LEVEL: 'info', ...env, DATABASE_URL: database.url });
  const logs: string[] = [];
  const log = createLogger(config.logLevel, { write: (line: string) => void logs.push(line) });
  const store = await openDatabase(config.databaseUrl, { poolSize: config.databasePoolSize, warn: (message) => log.warn(message) });
  const ctx = createContext({ config, store, log, transports: createTransports(config, log) });
  const app = await buildApp(ctx);
  const mock = await buildMockApp(ctx);
  const background = await startBackground(ctx, options);
  await app.listen({ port: 0, host: '127.0.0.1' });
  await mock.listen({ port: 0, host: '127.0.0.1' });
  const url = baseUrl(app);
  const mockUrl = baseUrl(mock);
  // Every answer the tests get is checked against the document (test/helpers/openapi-check.ts);
  // the mock listener serves only the two session operations of it.
  const document = app.swagger() as unknown as OpenApiDocument;
  registerOpenApi(url, document);
  registerOpenApi(mockUrl, {
    ...document,
    paths: pick(document.paths, ['/api/v1/authorization', '/api/v1/authorization/confirm'], 'post'),
  });
  return {
    url,
    mockUrl,
    ctx,
    logs,
    databaseUrl: database.url,
    close: async () => {
      forgetOpenApi(url);
      forgetOpenApi(mockUrl);
      await Promise.all([app.close(), mock.close()]);
      await background.stop();
      await ctx.messenger.close();
      await store.close();
      await database.drop();
    },
  };
}

/** Only `method` of each of `paths`. */
function pick(paths: OpenApiDocument['paths'], wanted: string[], method: string): OpenApiDocument['paths'] {
  return Object.fromEntries(wanted.map((path) => [path, { [method]: paths[path]?.[method] }]));
}

function baseUrl(app: App): string {
  const address = app.server.address() as AddressInfo;
  return `http://127.0.0.1:${address.port}`;
}
