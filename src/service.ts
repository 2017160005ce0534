import type { FastifyBaseLogger } from 'fastify';
import { buildApp, buildMockApp } from './app.js';
import { type Config, ConfigError, DEFAULT_SMTP_FROM, loadConfig } from './config.js';
import { createContext } from './context.js';
import { openDatabase } from './db/database.js';
import { refuseRequests } from './http/server.js';
import { startBackground } from './jobs/background.js';
import { createLogger } from './logger.js';
import { createTransports } from './messaging/transports/index.js';

/** How long a stopping service answers 503 stopping on the connections it has before it closes them. */
const REFUSING_MS = 500;

/**
 * Starts the service; resolves with its graceful stop (the caller wires it to SIGTERM and
 * SIGINT). A setting or an environment it cannot start with ends the process with one line
 * on stderr and exit code 1.
 */
export async function main(): Promise<(signal: string) => Promise<void>> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`lipa: configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }

  const log = createLogger(config.logLevel);
  // What the environment refuses (the database unreachable, a port taken, a host unknown) is
  // one line too, as a configuration error is, not a stack trace.
  const started = await start(config, log).catch((error: unknown) => {
    process.stderr.write(`lipa: cannot start: ${(error as Error).message}\n`);
    process.exit(1);
  });
  const { store, ctx, app, mock, background } = started;
  log.info({ env: config.env, database: store.dialect, mock: mock !== null }, 'lipa started');
  if (config.env === 'production' && (config.smtpUrl === null || config.smppUrl === null)) {
    // The embedded outbox hides login codes from operators in production: without a real
    // transport, a merchant (email) or a payer (SMS) cannot receive one.
    log.warn(
      { smtp: config.smtpUrl !== null, smpp: config.smppUrl !== null },
      'production without SMTP_URL or SMPP_URL: login codes of that channel reach no one',
    );
  }
  if (config.env === 'production' && config.smtpUrl !== null && config.smtpFrom === DEFAULT_SMTP_FROM) {
    // Mail servers check the sender's domain (SPF, DMARC): lipa.local has none.
    log.warn({ from: config.smtpFrom }, 'production without SMTP_FROM: email goes out from a domain that does not exist');
  }
  if (config.env === 'production' && config.publicBaseUrl !== null && config.trustProxy.length === 0) {
    // PUBLIC_BASE_URL says a proxy is in front: without TRUST_PROXY every client has its
    // address, so one client's bad tokens or logins lock out the operator's and everyone's.
    log.warn(
      { publicBaseUrl: config.publicBaseUrl },
      'production with PUBLIC_BASE_URL but without TRUST_PROXY: behind a proxy every client shares its per-IP limits and lockouts',
    );
  }
  if (config.adminTokenGenerated) {
    // Staging convenience (CONTRACT §1): the generated operator token, outside the JSON log.
    process.stderr.write(`lipa: ADMIN_TOKEN for this run: ${config.adminToken}\n`);
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'draining');
    // Requests are refused at once, but the connections stay open a moment: a keep-alive client
    // that had an answer just before sends its next request within milliseconds, and gets a
    // 503 stopping for it rather than a connection closed under it.
    refuseRequests(app);
    if (mock) refuseRequests(mock);
    await new Promise((resolve) => setTimeout(resolve, REFUSING_MS));
    // Listeners stop accepting, in-flight requests finish, then background work and the database.
    // A keep-alive connection whose request was in flight becomes idle once answered: close it
    // then, rather than when its client or the keep-alive timeout (72 s) ends it.
    const sweep = setInterval(() => {
      app.server.closeIdleConnections();
      mock?.server.closeIdleConnections();
    }, 100);
    await Promise.all([app.close(), mock?.close()]);
    clearInterval(sweep);
    await background.stop();
    await ctx.messenger.close();
    await store.close();
    log.info('stopped');
    process.exit(0);
  };
  return stop;
}

async function start(config: Config, log: FastifyBaseLogger) {
  const store = await openDatabase(config.databaseUrl, { poolSize: config.databasePoolSize, warn: (message) => log.warn(message) });
  if (store.migrationsApplied.length > 0) log.info({ migrations: store.migrationsApplied }, 'database migrated');
  const ctx = createContext({ config, store, log, transports: createTransports(config, log) });
  const app = await buildApp(ctx);
  const mock = config.mockPort !== 0 ? await buildMockApp(ctx) : null;
  const background = await startBackground(ctx);
  await app.listen({ port: config.port, host: config.host });
  if (mock) await mock.listen({ port: config.mockPort, host: config.host });
  return { store, ctx, app, mock, background };
}
