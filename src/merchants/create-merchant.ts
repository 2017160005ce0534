import { randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/database.js';
import { AppError, assertText, FieldChecks, validationError } from '../http/errors.js';
import { openAccount } from '../ledger/ledger.js';
import { isSendableAddress } from '../messaging/address.js';
import { hashPassword, pepperOf } from '../security/passwords.js';

export interface NewMerchant {
  login: string;
  password: string;
  name: string;
}

/** Registers a merchant account with its ledger account (operator API and CLI). */
export async function createMerchant(ctx: AppContext, input: NewMerchant) {
  const login = input.login.trim().toLowerCase();
  const checks = new FieldChecks();
  // The login is where the merchant's login codes go: an address the messaging API would take.
  checks.run(() => {
    if (!isSendableAddress(login)) throw validationError('login', 'must be an email address a login code can be sent to');
  });
  checks.run(() => assertText('name', input.name, 'name'));
  checks.done();
  const passwordHash = await hashPassword(input.password, pepperOf(ctx));
  const id = randomUUID();
  const now = ctx.now();
  try {
    await ctx.store.write(async (tx) => {
      await tx.insertInto('merchants').values({ id, login, name: input.name, password_hash: passwordHash, created_at: now }).execute();
      await openAccount(tx, 'merchant', id, now);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('login_taken', `A merchant with login ${login} already exists.`);
    throw error;
  }
  return { merchantId: id, login, name: input.name };
}
