import { parseArgs } from 'node:util';
import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { createContext } from '../context.js';
import { openDatabase } from '../db/database.js';
import { createLogger } from '../logger.js';

/** The operator CLI: the same operations as the operator API, on the configured database. */
const HELP = `Usage: npm run lipa -- <command> [options]

Commands:
  migrate                                             apply database migrations
  merchant create --login EMAIL --password PW --name NAME
  payer create --phone DIGITS --name NAME --pin PIN [--balance AMOUNT]
  payer deposit --phone DIGITS --amount AMOUNT
  categories                                          list merchant categories

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
} as const;

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
    throw new UsageError(`${(error as Error).message.replace(/\s*\n\s*/g, ' ')} (see --help)`);
  }
  const { positionals, values } = parsed;
  const command = positionals.join(' ');
  if (values.help || command === '' || command === 'help') return HELP;

  const text = (name: keyof typeof values): string => {
    const value = values[name];
    if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
    return value;
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
        body: { login: text('login'), password: text('password'), name: text('name') },
      };
      break;
    case 'payer create':
      request = {
        method: 'POST',
        url: '/api/v1/admin/payers',
        body: {
          phone: text('phone'),
          name: text('name'),
          pin: text('pin'),
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
    const app = await buildApp(createContext({ config, store, log: createLogger('warn') }));
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
