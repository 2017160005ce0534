import { randomInt, randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { Audience } from '../db/schema.js';
import { AppError } from '../http/errors.js';
import { accountSuspended, assertNotSuspended } from '../merchants/suspension.js';
import { DUMMY_PASSWORD_HASH, MOCK_SIGN_IN_CHECKS, pepperOf, SIGN_IN_CHECKS, verifyPassword } from '../security/passwords.js';
import { deriveKey } from '../security/secret-box.js';
import { hmacHex } from '../security/tokens.js';
import { findSubject, normaliseLogin, type Subject, upgradeSecretHash } from './subjects.js';
import { countLoginAttempt, forgiveLoginAttempt } from './throttle.js';

export const OTP_TTL_SECONDS = 300;

export function invalidCredentials(): AppError {
  // One message for unknown login and wrong password: neither is revealed.
  return new AppError('invalid_credentials', 'The login or password is incorrect.');
}

/** OTPs are stored as an HMAC under a key derived from the master key, bound to the login. */
export function hashOtp(ctx: AppContext, login: string, otp: string): string {
  return hmacHex(deriveKey(ctx.config.masterKey, 'otp'), `${login}\n${otp}`);
}

/**
 * The login and password of endpoint 1, judged: the subject, or 401 (and the attempt counted).
 * A place in the sign-in lane comes first: refused (503 busy), the request did nothing else.
 */
async function checkCredentials(ctx: AppContext, login: string, password: string, audience: Audience): Promise<Subject> {
  const place = (audience === 'main' ? SIGN_IN_CHECKS : MOCK_SIGN_IN_CHECKS).admit();
  try {
    await countLoginAttempt(ctx, login);
    const subject = await findSubject(ctx, login);
    const admitted = subject !== undefined && (audience === 'main' || subject.type === 'payer');
    // Unknown logins pay the same scrypt cost as wrong passwords.
    const hash = admitted ? subject.secretHash : await DUMMY_PASSWORD_HASH;
    const passwordOk = await verifyPassword(password, hash, place, pepperOf(ctx));
    if (!admitted || !passwordOk) throw invalidCredentials();
    await forgiveLoginAttempt(ctx, login);
    // Said only to whoever knows the password: a stranger gets the 401 above.
    if (subject.suspended) throw accountSuspended();
    return subject;
  } finally {
    place.done();
  }
}

/**
 * Endpoint 1: checks login and password, then issues a fresh OTP (replacing any earlier
 * one) and sends it: by email to a merchant, by SMS to a payer. The mock environment checks
 * the credentials of payers only and sends nothing (its OTP is the static test OTP).
 */
export async function startLogin(ctx: AppContext, input: { login: string; password: string }, audience: Audience) {
  const login = normaliseLogin(input.login);
  const subject = await checkCredentials(ctx, login, input.password, audience);
  await upgradeSecretHash(ctx, subject.type, subject.id, input.password, subject.secretHash);
  if (audience === 'main') {
    const otp = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const now = ctx.now();
    await ctx.store.write(async (tx) => {
      if (subject.type === 'merchant') await assertNotSuspended(ctx, tx, subject.id);
      // Only the newest OTP of a login is ever good.
      await tx
        .updateTable('otp_challenges')
        .set({ consumed_at: now })
        .where('login', '=', login)
        .where('consumed_at', 'is', null)
        .execute();
      await tx
        .insertInto('otp_challenges')
        .values({
          id: randomUUID(),
          login,
          subject_type: subject.type,
          subject_id: subject.id,
          otp_hash: hashOtp(ctx, login, otp),
          attempts: 0,
          created_at: now,
          expires_at: now + OTP_TTL_SECONDS * 1000,
          consumed_at: null,
        })
        .execute();
      const text = `Your Lipa verification code is ${otp}. It expires in 5 minutes. Never share it.`;
      await ctx.notifier.send(
        tx,
        subject.type === 'merchant'
          ? { channel: 'email', purpose: 'otp', to: login, subject: 'Your Lipa verification code', text }
          : { channel: 'sms', purpose: 'otp', to: login, text },
        now,
      );
    });
  }
  return { status: 'otp_sent' as const, expiresIn: OTP_TTL_SECONDS };
}
