/** SMTP_URL parsed: `smtp://[user[:pass]@]host[:port]` (STARTTLS when offered) or `smtps://…` (implicit TLS). */
export interface SmtpUrl {
  /** true for `smtps://`: TLS from the first byte (usually port 465). */
  secure: boolean;
  host: string;
  port: number;
  /** URL-decoded; null when the URL has none (no AUTH is attempted). */
  user: string | null;
  pass: string | null;
}

/**
 * Parses SMTP_URL. Errors never repeat the URL itself, since it may hold a password.
 */
export function parseSmtpUrl(value: string): SmtpUrl {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error('SMTP_URL must be a URL such as smtp://user:pass@smtp.example.com:587 (could not parse it)');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new Error(`SMTP_URL must start with smtp:// (STARTTLS when offered) or smtps:// (implicit TLS), not ${url.protocol}//`);
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new Error('SMTP_URL must name a host, e.g. smtp://smtp.example.com:587');
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    throw new Error('SMTP_URL must not have a path, query or fragment: only smtp[s]://[user[:pass]@]host[:port]');
  }
  const secure = url.protocol === 'smtps:';
  const port = url.port === '' ? (secure ? 465 : 587) : Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error('SMTP_URL has an invalid port');
  let user: string | null;
  let pass: string | null;
  try {
    user = url.username === '' ? null : decodeURIComponent(url.username);
    pass = url.password === '' ? null : decodeURIComponent(url.password);
  } catch {
    throw new Error('SMTP_URL has a badly percent-encoded user or password');
  }
  if (pass !== null && user === null) throw new Error('SMTP_URL has a password but no user');
  return { secure, host, port, user, pass };
}
