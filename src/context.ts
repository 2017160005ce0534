import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.js';
import type { Db } from './db/database.js';
import type { Notifier } from './notifier/notifier.js';
import { SecretBox } from './security/secret-box.js';

/** What every operation may use: built once at start and passed down explicitly. */
export interface AppContext {
  config: Config;
  store: Db;
  notifier: Notifier;
  secretBox: SecretBox;
  log: FastifyBaseLogger;
  now: () => number;
}

export function createContext(parts: Omit<AppContext, 'secretBox' | 'now'> & { now?: () => number }): AppContext {
  return { ...parts, secretBox: new SecretBox(parts.config.masterKey), now: parts.now ?? Date.now };
}
