/** SMPP_URL: where the SMSC is and how to bind to it. */

export interface SmppUrl {
  tls: boolean;
  host: string;
  port: number;
  systemId: string;
  password: string;
}

/** SMPP_SOURCE_ADDR: a number (digits, perhaps after +) or an alphanumeric sender id of 1-11 printable ASCII characters. */
export const isSmppSourceAddr = (value: string): boolean => /^\+?[0-9]{1,20}$/.test(value) || /^[\x20-\x7e]{1,11}$/.test(value);

const URL_SHAPE = 'smpp://system_id:password@host:2775 (smpps:// for TLS)';

/**
 * `smpp://system_id:password@host[:port]` (port 2775 by default), or `smpps://` (also the
 * package's `ssmpp://`) for SMPP over TLS (port 3550 by default). User and password are
 * percent-decoded. The error never repeats the password.
 */
export function parseSmppUrl(value: string): SmppUrl {
  const bad = (why: string) => new Error(`SMPP_URL ${why}; expected ${URL_SHAPE}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad('is not a URL');
  }
  const tls = url.protocol === 'smpps:' || url.protocol === 'ssmpp:';
  if (!tls && url.protocol !== 'smpp:') throw bad(`has scheme "${url.protocol}"`);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw bad('has no host');
  if (url.username === '') throw bad('has no system_id');
  if (url.search !== '' || url.hash !== '' || (url.pathname !== '' && url.pathname !== '/')) {
    throw bad('must not have a path, query or fragment');
  }
  const port = url.port === '' ? (tls ? 3550 : 2775) : Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad('has an invalid port');
  let systemId: string;
  let password: string;
  try {
    systemId = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    throw bad('has a badly percent-encoded system_id or password');
  }
  return { tls, host, port, systemId, password };
}

/** The URL without its password, for logs and errors. */
export function describeSmppUrl(target: Pick<SmppUrl, 'tls' | 'host' | 'port' | 'systemId'>): string {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  return `${target.tls ? 'smpps' : 'smpp'}://${encodeURIComponent(target.systemId)}@${host}:${target.port}`;
}
