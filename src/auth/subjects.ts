import type { AppContext } from '../context.js';
import type { SubjectType } from '../db/schema.js';
import { hashPassword, pepperOf, stale } from '../security/passwords.js';

export interface Subject {
  type: SubjectType;
  id: string;
  /** The normalised login: lower-case email for a merchant, phone digits for a payer. */
  login: string;
  secretHash: string;
  /** A merchant the operator has suspended (merchants/suspension.ts). */
  suspended: boolean;
}

/** Merchants log in with their email, payers with their phone digits (CONTRACT §3). */
export function normaliseLogin(login: string): string {
  const trimmed = login.trim();
  return trimmed.includes('@') ? trimmed.toLowerCase() : trimmed;
}

export async function findSubject(ctx: AppContext, login: string): Promise<Subject | undefined> {
  if (login.includes('@')) {
    const merchant = await ctx.store.db
      .selectFrom('merchants')
      .select(['id', 'password_hash', 'suspended_at'])
      .where('login', '=', login)
      .executeTakeFirst();
    return (
      merchant && {
        type: 'merchant',
        id: merchant.id,
        login,
        secretHash: merchant.password_hash,
        suspended: merchant.suspended_at !== null,
      }
    );
  }
  if (/^[0-9]{8,15}$/.test(login)) {
    const payer = await ctx.store.db.selectFrom('payers').select(['id', 'pin_hash']).where('phone', '=', login).executeTakeFirst();
    return payer && { type: 'payer', id: payer.id, login, secretHash: payer.pin_hash, suspended: false };
  }
  return undefined;
}

/**
 * Replaces a password or PIN hash of an older scheme (passwords.ts) once its secret has just
 * been checked right; conditional, so a hash changed meanwhile is left as it is. Best effort:
 * a failure is logged and tried again at the next use, never the sign-in's or approval's
 * failure. (Its scrypt is outside the lanes: once per account, after a right secret.)
 */
export async function upgradeSecretHash(ctx: AppContext, type: SubjectType, id: string, secret: string, stored: string): Promise<void> {
  if (!stale(stored)) return;
  try {
    const fresh = await hashPassword(secret, pepperOf(ctx));
    const [table, column] = type === 'merchant' ? (['merchants', 'password_hash'] as const) : (['payers', 'pin_hash'] as const);
    await ctx.store.write((tx) =>
      tx
        .updateTable(table)
        .set({ [column]: fresh })
        .where('id', '=', id)
        .where(column, '=', stored)
        .execute(),
    );
  } catch (err) {
    ctx.log.warn({ err, subject: type }, 'could not replace an old password or PIN hash; it is tried again at the next sign-in');
  }
}
