import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * JSON logs. Request logs carry the request id (Fastify's reqId). Credentials never reach
 * a log line: headers are not logged, and these paths are redacted wherever they appear.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'lipa' },
      serializers: { req: requestLogged },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.api_key',
          'req.headers["x-service-signature"]',
          'password',
          'pin',
          'otp',
          'token',
          'secret',
          'apiKey',
          '*.password',
          '*.pin',
          '*.otp',
          '*.token',
          '*.secret',
          '*.apiKey',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/** A phone number: a path segment or query value of 8 to 15 digits alone (not digits inside an id). */
const PHONE_IN_PATH = /(?<=^|[/=])((?:\+|%2B)?)([0-9]{8,15})(?=$|[/&])/gi;

/** The last 3 digits kept, and up to 4 first ones (the country code) while at least 5 stay hidden. */
const maskPhone = (_match: string, plus: string, digits: string): string => {
  const shown = Math.min(4, digits.length - 8);
  return `${plus}${digits.slice(0, Math.max(0, shown))}•••••${digits.slice(-3)}`;
};
/** Query parameters whose values are never logged. */
const SECRET_PARAM = /otp|pin|pass|token|secret|key/i;

/**
 * A request as its log line shows it: the URL with phone numbers masked (a payer's phone is
 * in the operator's deposit path) and secret-looking query parameters redacted.
 */
function requestLogged(req: { method?: string; url?: string; host?: string; ip?: string; socket?: { remotePort?: number } }) {
  return {
    method: req.method,
    url: loggedUrl(req.url ?? ''),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

function loggedUrl(url: string): string {
  const at = url.indexOf('?');
  const path = (at < 0 ? url : url.slice(0, at)).replace(PHONE_IN_PATH, maskPhone);
  if (at < 0) return path;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const name = pair.split('=', 1)[0] ?? '';
      return SECRET_PARAM.test(name) && pair.includes('=') ? `${name}=[redacted]` : pair.replace(PHONE_IN_PATH, maskPhone);
    })
    .join('&');
  return `${path}?${query}`;
}

/**
 * Says whether a recurring line is due: each distinct text at most once per `everyMs`, so
 * that an outage is logged, not one line per message and try. At most `remember` texts are
 * kept; when full, the one logged longest ago is forgotten first.
 */
export class LogThrottle {
  private readonly logged = new Map<string, number>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly everyMs = 60_000,
    private readonly remember = 100,
  ) {}

  due(text: string): boolean {
    const now = this.now();
    if ((this.logged.get(text) ?? Number.NEGATIVE_INFINITY) > now - this.everyMs) return false;
    this.logged.delete(text);
    if (this.logged.size >= this.remember) this.logged.delete(this.logged.keys().next().value as string);
    this.logged.set(text, now);
    return true;
  }

  /** Forgets every text: the trouble is over, the next one is news. */
  clear(): void {
    this.logged.clear();
  }
}
