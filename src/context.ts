import type { FastifyBaseLogger } from 'fastify';
import { OTP_TTL_SECONDS } from './auth/login.js';
import type { Config } from './config.js';
import type { Db } from './db/database.js';
import { Cursors } from './http/pagination.js';
import { Messenger, type Transports } from './messaging/messenger.js';
import type { Notifier } from './notifier/notifier.js';
import { SecretBox } from './security/secret-box.js';

/** What every operation may use: built once at start and passed down explicitly. */
export interface AppContext {
  config: Config;
  store: Db;
  /** The service's own messages (OTPs, prompts); the messenger implements it. */
  notifier: Notifier;
  messenger: Messenger;
  secretBox: SecretBox;
  /** The signed keyset cursors of every list (http/pagination.ts). */
  cursors: Cursors;
  log: FastifyBaseLogger;
  now: () => number;
}

export function createContext(parts: {
  config: Config;
  store: Db;
  log: FastifyBaseLogger;
  transports?: Transports;
  now?: () => number;
}): AppContext {
  const now = parts.now ?? Date.now;
  const { config } = parts;
  // A login code or a payment prompt is worth sending while there is time left to use it.
  const windows: Record<string, number> = { otp: OTP_TTL_SECONDS * 800, payment_prompt: config.paymentTtlSeconds * 800 };
  const secretBox = new SecretBox(parts.config.masterKey);
  const messenger = new Messenger(
    parts.store,
    parts.log,
    parts.transports ?? { email: null, sms: null },
    secretBox,
    now,
    (purpose) => windows[purpose] ?? config.messageRetryWindowSeconds * 1000,
  );
  return {
    config: parts.config,
    store: parts.store,
    log: parts.log,
    messenger,
    notifier: messenger,
    secretBox,
    cursors: new Cursors(parts.config.masterKey),
    now,
  };
}
