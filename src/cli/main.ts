import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { createContext } from '../context.js';
import { openDatabase } from '../db/database.js';
import { AppError } from '../http/errors.js';
import { createLogger } from '../logger.js';
import { createMerchant } from '../merchants/create-merchant.js';
import { createPayer, deposit } from '../payers/payers.js';

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

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    help: { type: 'boolean', short: 'h' },
    login: { type: 'string' },
    password: { type: 'string' },
    name: { type: 'string' },
    phone: { type: 'string' },
    pin: { type: 'string' },
    balance: { type: 'string' },
    amount: { type: 'string' },
  },
});

function required(name: keyof typeof values): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new AppError('validation_failed', `--${name} is required`);
  return value;
}

function amount(name: 'balance' | 'amount'): number {
  const value = Number(required(name));
  if (!Number.isFinite(value)) throw new AppError('validation_failed', `--${name} must be a number`);
  return value;
}

async function run(): Promise<unknown> {
  const command = positionals.join(' ');
  if (values.help || command === '' || command === 'help') return HELP;
  const config = loadConfig();
  const store = await openDatabase(config.databaseUrl);
  const ctx = createContext({ config, store, log: createLogger('warn') });
  try {
    switch (command) {
      case 'migrate':
        return { migrated: true, database: store.dialect };
      case 'merchant create':
        return await createMerchant(ctx, { login: required('login'), password: required('password'), name: required('name') });
      case 'payer create': {
        if (!/^[0-9]{4,6}$/.test(required('pin'))) throw new AppError('validation_failed', '--pin must be 4 to 6 digits');
        if (!/^[0-9]{8,15}$/.test(required('phone'))) throw new AppError('validation_failed', '--phone must be 8 to 15 digits');
        const balance = values.balance === undefined ? undefined : amount('balance');
        return await createPayer(ctx, {
          phone: required('phone'),
          name: required('name'),
          pin: required('pin'),
          ...(balance === undefined ? {} : { balance }),
        });
      }
      case 'payer deposit':
        return await deposit(ctx, required('phone'), amount('amount'));
      case 'categories':
        return await store.db.selectFrom('categories').selectAll().orderBy('mcc').execute();
      default:
        throw new AppError('not_found', `unknown command "${command}"; see --help`);
    }
  } finally {
    await store.close();
  }
}

try {
  const result = await run();
  process.stdout.write(typeof result === 'string' ? `${result}\n` : `${JSON.stringify(result, null, 2)}\n`);
} catch (error) {
  const message = error instanceof AppError || error instanceof ConfigError ? error.message : String(error);
  process.stderr.write(`lipa: ${message}\n`);
  process.exit(1);
}
