import { buildApp, buildMockApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { createContext } from './context.js';
import { openDatabase } from './db/database.js';
import { startBackground } from './jobs/background.js';
import { createLogger } from './logger.js';
import { createTransports } from './messaging/transports/index.js';

async function main(): Promise<void> {
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
  const store = await openDatabase(config.databaseUrl);
  const ctx = createContext({ config, store, log, transports: createTransports(config, log) });
  const app = await buildApp(ctx);
  const mock = config.mockPort !== 0 ? await buildMockApp(ctx) : null;
  const background = await startBackground(ctx);
  await app.listen({ port: config.port, host: config.host });
  if (mock) await mock.listen({ port: config.mockPort, host: config.host });
  log.info({ env: config.env, database: store.dialect, mock: mock !== null }, 'lipa started');
  if (config.adminTokenGenerated) {
    // Staging convenience (CONTRACT §1): the generated operator token, outside the JSON log.
    process.stderr.write(`lipa: ADMIN_TOKEN for this run: ${config.adminToken}\n`);
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'draining');
    // Listeners stop accepting, in-flight requests finish, then background work and the database.
    await Promise.all([app.close(), mock?.close()]);
    await background.stop();
    await ctx.messenger.close();
    await store.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

await main();
