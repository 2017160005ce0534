import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { isSendableAddress } from './messaging/address.js';
import type { SmppBind } from './messaging/transports/smpp.js';
import type { MessageIdType } from './messaging/transports/smpp-protocol.js';
import { isSmppSourceAddr, parseSmppUrl } from './messaging/transports/smpp-url.js';
import { parseSmtpUrl } from './messaging/transports/smtp-url.js';

/** Every setting of CONTRACT §1, parsed once at start. */
export interface Config {
  env: 'staging' | 'production';
  host: string;
  port: number;
  /** 0 = the mock environment listener is off. */
  mockPort: number;
  databaseUrl: string;
  /** PostgreSQL connections per instance. */
  databasePoolSize: number;
  adminToken: string;
  /** Whether ADMIN_TOKEN was generated at start (staging); it is printed then. */
  adminTokenGenerated: boolean;
  /** The fixed test OTP; null in production. */
  stagingOtp: string | null;
  publicBaseUrl: string | null;
  /** TRUST_PROXY: the proxies (addresses or CIDRs) whose X-Forwarded-For names the client; empty = none. */
  trustProxy: string[];
  /** 32-byte key for AES-256-GCM of signing secrets and for peppering OTP hashes. */
  masterKey: Buffer;
  paymentTtlSeconds: number;
  /** How long after a payment is paid it may be refunded (CONTRACT §11). */
  refundWindowDays: number;
  callbackAllowPrivate: boolean;
  callbackRetryBaseSeconds: number;
  /** How long a merchant's message is retried through transient failures before it is `failed`. */
  messageRetryWindowSeconds: number;
  callbackAllowInsecureTls: boolean;
  /** CALLBACK_DNS_SERVERS: resolvers for callback targets (`ip`, `ip:port`, `[ipv6]:port`); empty = the system resolver. */
  callbackDnsServers: string[];
  rateLimitLoginFailures: number;
  rateLimitAuthIpPerMin: number;
  rateLimitKeyPerSec: number;
  /** Bearer token lifetime; CONTRACT §3 says 1 h by default. */
  tokenTtlSeconds: number;
  /** smtp(s)://user:pass@host:port; null = the embedded outbox delivers email. */
  smtpUrl: string | null;
  smtpFrom: string;
  /** smpp://system_id:password@host:port; null = the embedded outbox delivers SMS. */
  smppUrl: string | null;
  smppSourceAddr: string;
  /** The sender's TON and NPI when the SMSC wants others than those read from it; null: read from it. */
  smppSourceTon: number | null;
  smppSourceNpi: number | null;
  /** SMPP_MSG_ID_TYPE (as Kannel's msg-id-type): how the SMSC writes message ids; null: compared as written. */
  smppMsgIdType: MessageIdType | null;
  /** SMPP_THROUGHPUT: most submit_sm a second on this instance's bind; null: no limit. */
  smppThroughput: number | null;
  /** SMPP_BIND: one transceiver bind, or a transmitter and a receiver bind. */
  smppBind: SmppBind;
  logLevel: string;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

/** The sender when SMTP_FROM is not set: fine for a sandbox, a domain that does not exist for the world. */
export const DEFAULT_SMTP_FROM = 'Lipa <no-reply@lipa.local>';

const DEV_MASTER_KEY_SEED = 'lipa staging master key: never use in production';

export function loadConfig(env: Env = process.env): Config {
  const lipaEnv = oneOf(env, 'LIPA_ENV', ['staging', 'production'], 'staging');
  const production = lipaEnv === 'production';

  if (production) {
    const missing = ['ADMIN_TOKEN', 'LIPA_MASTER_KEY'].filter((name) => !env[name]);
    if (missing.length > 0) {
      throw new ConfigError(`production needs ${missing.join(' and ')} to be set`);
    }
    if (env.STAGING_OTP !== undefined && env.STAGING_OTP !== '') {
      throw new ConfigError('STAGING_OTP must not be set in production');
    }
  }

  const mockPort = port(env, 'MOCK_PORT', production ? 0 : 8081);
  if (production && mockPort !== 0) {
    // The mock listener accepts the static test OTP, which production never does.
    throw new ConfigError('MOCK_PORT must be 0 in production: the mock environment is for staging only');
  }

  const mainPort = port(env, 'PORT', 8080);
  if (mockPort !== 0 && mockPort === mainPort) throw new ConfigError(`PORT and MOCK_PORT must differ (both are ${mainPort})`);

  const stagingOtp = production ? null : env.STAGING_OTP || '534789';
  if (stagingOtp !== null && !/^[0-9]{6}$/.test(stagingOtp)) {
    throw new ConfigError('STAGING_OTP must be 6 digits');
  }

  const adminToken = env.ADMIN_TOKEN || randomBytes(24).toString('base64url');
  // It travels in an Authorization header: visible ASCII, no spaces.
  if (!/^[\x21-\x7e]{16,}$/.test(adminToken)) {
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters, each a visible ASCII character (no spaces)');
  }

  return {
    env: lipaEnv,
    // Empty is unset, as for every setting (an empty HOST would listen on every interface).
    host: env.HOST || '127.0.0.1',
    port: mainPort,
    mockPort,
    databaseUrl: databaseUrl(env.DATABASE_URL || 'file:./data/lipa.sqlite'),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 20, 1),
    adminToken,
    adminTokenGenerated: !env.ADMIN_TOKEN,
    stagingOtp,
    publicBaseUrl: publicBaseUrl(env.PUBLIC_BASE_URL, production),
    trustProxy: trustProxy(env.TRUST_PROXY),
    masterKey: masterKey(env.LIPA_MASTER_KEY),
    paymentTtlSeconds: int(env, 'PAYMENT_TTL_SECONDS', 120, 1),
    refundWindowDays: int(env, 'REFUND_WINDOW_DAYS', 180, 1),
    callbackAllowPrivate: bool(env, 'CALLBACK_ALLOW_PRIVATE', !production),
    callbackRetryBaseSeconds: int(env, 'CALLBACK_RETRY_BASE_SECONDS', 30, 1),
    messageRetryWindowSeconds: int(env, 'MESSAGE_RETRY_WINDOW_SECONDS', 86_400, 1),
    callbackAllowInsecureTls: bool(env, 'CALLBACK_ALLOW_INSECURE_TLS', !production),
    callbackDnsServers: dnsServers(env.CALLBACK_DNS_SERVERS),
    rateLimitLoginFailures: int(env, 'RATE_LIMIT_LOGIN_FAILURES', 10, 1),
    rateLimitAuthIpPerMin: int(env, 'RATE_LIMIT_AUTH_IP_PER_MIN', 300, 1),
    rateLimitKeyPerSec: int(env, 'RATE_LIMIT_KEY_PER_SEC', 100, 1),
    tokenTtlSeconds: int(env, 'TOKEN_TTL_SECONDS', 3600, 1),
    smtpUrl: transportUrl(env, 'SMTP_URL'),
    smtpFrom: smtpFrom(env.SMTP_FROM || DEFAULT_SMTP_FROM),
    smppUrl: transportUrl(env, 'SMPP_URL'),
    smppSourceAddr: smppSourceAddr(env.SMPP_SOURCE_ADDR || 'LIPA'),
    smppSourceTon: byte(env, 'SMPP_SOURCE_TON'),
    smppSourceNpi: byte(env, 'SMPP_SOURCE_NPI'),
    smppMsgIdType: msgIdType(env.SMPP_MSG_ID_TYPE),
    smppThroughput: env.SMPP_THROUGHPUT ? int(env, 'SMPP_THROUGHPUT', 0, 1) : null,
    smppBind: oneOf(env, 'SMPP_BIND', ['transceiver', 'pair'], 'transceiver'),
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
  };
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
  }
  return value as T;
}

function int(env: Env, name: string, fallback: number, min: number): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new ConfigError(`${name} must be a whole number >= ${min} (got "${value}")`);
  }
  return Number(value);
}

/** An optional whole number 0-255 (an SMPP address's TON or NPI); null when unset. */
function byte(env: Env, name: string): number | null {
  if (env[name] === undefined || env[name] === '') return null;
  const value = int(env, name, 0, 0);
  if (value > 255) throw new ConfigError(`${name} must be a whole number 0-255 (got "${value}")`);
  return value;
}

function port(env: Env, name: string, fallback: number): number {
  const value = int(env, name, fallback, 0);
  if (value > 65535) throw new ConfigError(`${name} must be a port number 0-65535 (got "${value}")`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(`${name} must be true or false (got "${value}")`);
}

/** SMPP_MSG_ID_TYPE: 0-3, also as Kannel's configurations write it (01, 0x01); null when unset or -1 (Kannel's "as written"). */
function msgIdType(value: string | undefined): MessageIdType | null {
  if (value === undefined || value === '' || value === '-1') return null;
  const digit = /^(?:0x)?0*([0-3])$/i.exec(value)?.[1];
  if (digit === undefined) throw new ConfigError(`SMPP_MSG_ID_TYPE must be 0, 1, 2 or 3, or -1 for unset (got "${value}")`);
  return Number(digit) as MessageIdType;
}

function smppSourceAddr(value: string): string {
  if (!isSmppSourceAddr(value)) {
    throw new ConfigError(
      `SMPP_SOURCE_ADDR must be a number (digits, + allowed) or a sender id of 1-11 printable ASCII characters (got "${value}")`,
    );
  }
  return value;
}

/** `address` or `Name <address>`, the address one the messaging API would send to. */
function smtpFrom(value: string): string {
  const address = /^[^<>]*<([^<>]*)>\s*$/.exec(value)?.[1] ?? value;
  // A line break in the name would end the From header and start another (a Bcc, say).
  if (!isSendableAddress(address.trim()) || /\p{Cc}/u.test(value)) {
    throw new ConfigError(`SMTP_FROM must be an email address, alone or as Name <address> (got "${value}")`);
  }
  return value;
}

/**
 * SMTP_URL or SMPP_URL, checked at start by the parser its transport uses later, so that a
 * malformed one (no system_id, a path, bad percent-encoding) is a configuration error before
 * anything else is done. The parsers' messages name the variable and never repeat a password.
 */
function transportUrl(env: Env, name: 'SMTP_URL' | 'SMPP_URL'): string | null {
  const value = env[name];
  if (value === undefined || value === '') return null;
  try {
    if (name === 'SMTP_URL') parseSmtpUrl(value);
    else parseSmppUrl(value);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  return value;
}

function databaseUrl(value: string): string {
  if (value.startsWith('file:') || value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    return value;
  }
  throw new ConfigError('DATABASE_URL must start with file: (SQLite) or postgres:// (PostgreSQL)');
}

function publicBaseUrl(value: string | undefined, production: boolean): string | null {
  if (value === undefined || value === '') return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`PUBLIC_BASE_URL must be an absolute URL such as https://pay.example.com (got "${value}")`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError('PUBLIC_BASE_URL must be an http(s) URL');
  }
  if (production && url.protocol !== 'https:') throw new ConfigError('PUBLIC_BASE_URL must be an https URL in production');
  // Merchants would sign with :0, and every paymentUrl would point at a port nothing listens on.
  if (url.port === '0') throw new ConfigError('PUBLIC_BASE_URL must not use port 0');
  // Merchants sign `https://{host}`: an origin, nothing after it (a path would be dropped unseen).
  if (url.href !== `${url.origin}/`) {
    throw new ConfigError(
      `PUBLIC_BASE_URL must be an origin only, scheme, host and port, such as https://pay.example.com (got "${value}")`,
    );
  }
  return url.origin;
}

/**
 * TRUST_PROXY: comma-separated addresses or CIDRs of the proxies in front of the service. A
 * request from one of them is counted (rate limits) under the client address its
 * X-Forwarded-For gives; from anywhere else the header is ignored, so it cannot be forged.
 */
function trustProxy(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  return value.split(',').map((raw) => {
    const entry = raw.trim();
    const [address, bits, ...rest] = entry.split('/');
    const family = isIP(address ?? '');
    const maxBits = family === 6 ? 128 : 32;
    const validBits = bits === undefined || (/^[0-9]{1,3}$/.test(bits) && Number(bits) <= maxBits);
    if (family === 0 || !validBits || rest.length > 0) {
      throw new ConfigError(`TRUST_PROXY must be comma-separated addresses or CIDRs such as 10.0.0.7,10.1.0.0/16 (got "${entry}")`);
    }
    return entry;
  });
}

/**
 * CALLBACK_DNS_SERVERS: comma-separated `ip`, `ip:port` (IPv4), `ipv6` or `[ipv6]:port`; unset or
 * empty = the system resolver. Returned in the form dns.Resolver#setServers accepts.
 */
function dnsServers(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  return value.split(',').map((raw) => {
    const entry = raw.trim();
    const bad = () =>
      new ConfigError(
        `CALLBACK_DNS_SERVERS must be comma-separated ip or ip:port entries such as 10.0.0.53,[2001:db8::53]:53 (got "${entry}")`,
      );
    const checkPort = (digits: string) => {
      if (!/^[0-9]{1,5}$/.test(digits) || Number(digits) < 1 || Number(digits) > 65535) throw bad();
    };
    if (isIP(entry) !== 0) return isIP(entry) === 6 ? `[${entry}]` : entry;
    const v6 = /^\[([^\]]+)\](?::([^:]*))?$/.exec(entry);
    if (v6) {
      if (isIP(v6[1] ?? '') !== 6) throw bad();
      if (v6[2] !== undefined) checkPort(v6[2]);
      return entry;
    }
    const v4 = /^([^:]+):([^:]*)$/.exec(entry);
    if (v4 && isIP(v4[1] ?? '') === 4) {
      checkPort(v4[2] ?? '');
      return entry;
    }
    throw bad();
  });
}

/** LIPA_MASTER_KEY is 32 bytes as 64 hex digits or base64; staging derives a fixed dev key. */
function masterKey(value: string | undefined): Buffer {
  if (value === undefined || value === '') {
    return createHash('sha256').update(DEV_MASTER_KEY_SEED).digest();
  }
  // Node's base64 decoder skips what is not base64 (a space, a `!`): the text is checked
  // whole first, so a mistyped key is refused instead of silently read as another.
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  const key = /^[A-Za-z0-9+/]{43}=?$/.test(value) || /^[A-Za-z0-9_-]{43}=?$/.test(value) ? Buffer.from(value, 'base64') : null;
  if (key?.length !== 32) {
    throw new ConfigError(
      'LIPA_MASTER_KEY must be 32 bytes, as 64 hex digits or base64 (44 characters, or base64url); a key that started before with characters that are not base64 (a space) is the same key without them',
    );
  }
  return key;
}
