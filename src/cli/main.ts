import { parseArgs } from 'node:util';
import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { createContext } from '../context.js';
import { openDatabase } from '../db/database.js';
import { createLogger } from '../logger.js';
import { ensureStagingPayers } from '../wallet/staging-payers.js';

/** The operator CLI: the same operations as the operator API, on the configured database. */
const HELP = `Usage: npm run lipa -- <command> [options]

Commands:
  migrate                                             apply database migrations
  merchant create --login EMAIL --password PW --name NAME
  merchant list [--limit N] [--cursor C]              newest first, a page
  merchant suspend --id MERCHANT_ID                   revoke its keys, end its sessions, refuse its sign-ins
  merchant reinstate --id MERCHANT_ID                 let it sign in again
  merchant settle --id MERCHANT_ID --amount AMOUNT --reference REF
                                                      pay out its balance to its bank (a settlement)
  payer create --phone DIGITS --name NAME --pin PIN [--balance AMOUNT]
  payer list [--limit N] [--cursor C]                 newest first, with balances, a page
  payer deposit --phone DIGITS --amount AMOUNT
  outbox [--limit N] [--cursor C]                     messages sent, newest first, a page
  categories                                          list merchant categories

--password - and --pin - read the secret from the first line of standard input, so that it
is not in the command line, which other users of the machine may read (ps, /proc).

A list prints one page, {"data": [...], "nextCursor": ...}: --limit N rows (1 to 500,
default 100); pass its nextCursor as --cursor for the next page (null on the last).

Uses DATABASE_URL (default file:./data/lipa.sqlite) and the other settings of the service.
Prints JSON results; exits 1 with a message on error.`;

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  login: { type: 'string' },
  password: { type: 'string' },
  name: { type: 'string' },
  phone: { type: 'string' },
  pin: { type: 'string' },
  balance: { type: 'string' },
  amount: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  id: { type: 'string' },
  reference: { type: 'string' },
} as const;

/** The longest first line of standard input read for a secret. */
const STDIN_LINE_MAX = 1024;

/** The first line of standard input (a secret given as "-"). */
async function firstLineOfStdin(what: string): Promise<string> {
  // At a terminal, say what is awaited (the typed text shows: a pipe is the way for scripts).
  if (process.stdin.isTTY) process.stderr.write(`${what}: `);
  process.stdin.setEncoding('utf8');
  let text = '';
  for await (const chunk of process.stdin) {
    text += chunk;
    // No secret is that long (the API takes 256 characters at most): stop reading.
    if (text.includes('\n') || text.length > STDIN_LINE_MAX) break;
  }
  const line = text.split(/\r?\n/, 1)[0] ?? '';
  if (line.length > STDIN_LINE_MAX) throw new UsageError(`the first line of standard input is over ${STDIN_LINE_MAX} characters`);
  return line;
}

/** A number given on the command line, kept as its digits. */
class RawNumber {
  constructor(readonly digits: string) {}
}

/** JSON text of a body whose RawNumbers are written as typed. */
function jsonWithRawNumbers(body: unknown): string {
  const raw: string[] = [];
  const text = JSON.stringify(body, (_key, value: unknown) => (value instanceof RawNumber ? `\u0000${raw.push(value.digits) - 1}` : value));
  return text.replace(/"\\u0000([0-9]+)"/g, (_match, index: string) => raw[Number(index)] ?? 'null');
}

/** A refusal of the command line itself: printed as one line, exit 1. */
class UsageError extends Error {}

/**
 * Each command is the operator API's request, answered in-process by the service's own
 * routes (`inject`, no port opened): the same validation, the same errors, the same JSON.
 */
async function run(argv: string[]): Promise<unknown> {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; allowPositionals: true; options: typeof OPTIONS }>>;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (error) {
    // Node's first sentence ("Unknown option '--bogus'"); its advice about "--" is not this CLI's.
    const message = (error as Error).message;
    const said = message
      .split(/\.\s/, 1)[0]
      ?.replace(/\s*\n\s*/g, ' ')
      .replace(/\.$/, '');
    // "--limit -1": a value that starts with a dash reads as another option; say how to give it.
    const option = /^Option '(--[a-z]+)' argument is ambiguous/.exec(message)?.[1];
    if (option) throw new UsageError(`${option} needs a value; one that starts with a dash is written ${option}=-…`);
    throw new UsageError(`${said} (see --help)`);
  }
  const { positionals, values } = parsed;
  const command = positionals.join(' ');
  if (values.help || command === '' || command === 'help') return HELP;

  const text = (name: keyof typeof values): string => {
    const value = values[name];
    if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
    return value;
  };
  /** A secret: as given, or "-" for the first line of standard input. */
  const secret = async (name: 'password' | 'pin'): Promise<string> => {
    const value = text(name);
    if (value !== '-') return value;
    const line = await firstLineOfStdin(name === 'pin' ? 'PIN' : 'Password');
    if (line === '') throw new UsageError(`--${name} - read nothing from standard input`);
    return line;
  };
  /** `?limit=N&cursor=C` of the options given (the API checks them). */
  const pageQuery = (): string => {
    const query = new URLSearchParams();
    if (values.limit !== undefined) query.set('limit', values.limit);
    if (values.cursor !== undefined) query.set('cursor', values.cursor);
    const text = query.toString();
    return text === '' ? '' : `?${text}`;
  };
  /**
   * A decimal number as written (not 0x10, 1e3 or Infinity), passed on as those very digits
   * in the JSON text, so that the API checks it as typed (too many digits are refused there).
   */
  const decimal = (name: 'balance' | 'amount'): RawNumber => {
    const value = text(name);
    if (!/^-?[0-9]+(\.[0-9]+)?$/.test(value))
      throw new UsageError(`--${name} must be a decimal number such as 150 or 99.50 (got "${value}")`);
    return new RawNumber(value);
  };
  let request: { method: 'GET' | 'POST'; url: string; body?: unknown } | null;
  switch (command) {
    case 'migrate':
      request = null;
      break;
    case 'merchant create':
      request = {
        method: 'POST',
        url: '/api/v1/admin/merchants',
        body: { login: text('login'), password: await secret('password'), name: text('name') },
      };
      break;
    case 'merchant suspend':
    case 'merchant reinstate':
      request = {
        method: 'POST',
        url: `/api/v1/admin/merchants/${encodeURIComponent(text('id'))}/${command === 'merchant suspend' ? 'suspend' : 'reinstate'}`,
      };
      break;
    case 'merchant settle':
      request = {
        method: 'POST',
        url: `/api/v1/admin/merchants/${encodeURIComponent(text('id'))}/settlements`,
        body: { amount: decimal('amount'), reference: text('reference') },
      };
      break;
    case 'merchant list':
      request = { method: 'GET', url: `/api/v1/admin/merchants${pageQuery()}` };
      break;
    case 'payer list':
      request = { method: 'GET', url: `/api/v1/admin/payers${pageQuery()}` };
      break;
    case 'outbox':
      request = { method: 'GET', url: `/api/v1/admin/outbox${pageQuery()}` };
      break;
    case 'payer create':
      request = {
        method: 'POST',
        url: '/api/v1/admin/payers',
        body: {
          phone: text('phone'),
          name: text('name'),
          pin: await secret('pin'),
          ...(values.balance === undefined ? {} : { balance: decimal('balance') }),
        },
      };
      break;
    case 'payer deposit':
      request = {
        method: 'POST',
        url: `/api/v1/admin/payers/${encodeURIComponent(text('phone'))}/deposits`,
        body: { amount: decimal('amount') },
      };
      break;
    case 'categories':
      request = { method: 'GET', url: '/api/v1/categories' };
      break;
    default:
      throw new UsageError(`unknown command "${command}"; see --help`);
  }

  const config = loadConfig();
  const store = await openDatabase(config.databaseUrl, { poolSize: config.databasePoolSize });
  try {
    if (request === null) return { migrated: true, database: store.dialect, applied: store.migrationsApplied };
    const ctx = createContext({ config, store, log: createLogger('warn') });
    // The staging test payers are in every staging database, also one the service never served.
    if (config.env === 'staging') await ensureStagingPayers(ctx);
    const app = await buildApp(ctx);
    try {
      const reply = await app.inject({
        method: request.method,
        url: request.url,
        headers: { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' },
        ...(request.body === undefined ? {} : { payload: jsonWithRawNumbers(request.body) }),
      });
      const answer = reply.json() as { error?: { message: string } };
      if (reply.statusCode >= 400) throw new UsageError(answer.error?.message ?? `the service answered ${reply.statusCode}`);
      return answer;
    } finally {
      await app.close();
    }
  } finally {
    await store.close();
  }
}

try {
  const result = await run(process.argv.slice(2));
  process.stdout.write(typeof result === 'string' ? `${result}\n` : `${JSON.stringify(result, null, 2)}\n`);
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`lipa: ${message}\n`);
  process.exit(1);
}
