import { randomUUID, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import type { Tx } from '../db/database.js';
import type { Audience, SubjectType } from '../db/schema.js';
import { AppError } from '../http/errors.js';
import { assertNotSuspended } from '../merchants/suspension.js';
import { randomSecret, safeEqual, sha256Hex } from '../security/tokens.js';
import { hashOtp } from './login.js';
import { findSubject, normaliseLogin } from './subjects.js';
import { clearLoginFailures, countLoginAttempt, forgiveLoginAttempt } from './throttle.js';

/** An OTP dies after this many wrong tries (CONTRACT §3). */
export const MAX_OTP_ATTEMPTS = 5;

/**
 * One answer for every refusal: endpoint 2 takes any login, so a count of tries left (or "no
 * code") would tell a stranger which logins exist and just passed their password.
 */
const invalidOtp = () =>
  new AppError(
    'invalid_otp',
    `The code is wrong, used or expired: check it and try again, or log in again for a new one (a code takes at most ${MAX_OTP_ATTEMPTS} wrong tries).`,
  );

/** How long after its use a code sent again is a repeat, not a guess. */
const JUST_USED_MS = 60_000;

/**
 * A refused try with the code this login used (or had replaced by a new login) a moment ago
 * (a form sent twice, a client's retry racing its own success) is no guess: it tells nobody
 * anything new, so it does not count towards the login's lockout. Anything else stays
 * counted, the staging OTP included.
 */
async function forgiveRepeat(ctx: AppContext, login: string, otp: string, now: number, countedIn: number): Promise<void> {
  const used = await ctx.store.db
    .selectFrom('otp_challenges')
    .select('otp_hash')
    .where('login', '=', login)
    .where('consumed_at', '>=', now - JUST_USED_MS)
    .orderBy('consumed_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (used && timingSafeEqual(Buffer.from(hashOtp(ctx, login, otp)), Buffer.from(used.otp_hash))) {
    await forgiveLoginAttempt(ctx, login, countedIn);
  }
}

/**
 * Endpoint 2: exchanges a live OTP for a bearer token. In staging the fixed test OTP is
 * accepted in place of the one sent, but only for a login that has just passed endpoint 1.
 */
export async function confirmOtp(ctx: AppContext, input: { login: string; otp: string }) {
  const login = normaliseLogin(input.login);
  const countedIn = await countLoginAttempt(ctx, login);
  const now = ctx.now();
  const challenge = await ctx.store.db
    .selectFrom('otp_challenges')
    .selectAll()
    .where('login', '=', login)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .where('attempts', '<', MAX_OTP_ATTEMPTS)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!challenge) {
    await forgiveRepeat(ctx, login, input.otp, now, countedIn);
    throw invalidOtp();
  }
  const matches =
    timingSafeEqual(Buffer.from(hashOtp(ctx, login, input.otp)), Buffer.from(challenge.otp_hash)) ||
    (ctx.config.stagingOtp !== null && safeEqual(input.otp, ctx.config.stagingOtp));
  // Every try takes one of the code's tries first, conditionally, so that guesses sent at once
  // cannot get past MAX_OTP_ATTEMPTS; the right one then consumes the code in the same unit
  // (its row held: of two concurrent confirmations with one OTP, exactly one wins).
  const session = await ctx.store.write(async (tx) => {
    // The merchant's row before the code's, in the order a suspension takes them (no deadlock).
    if (challenge.subject_type === 'merchant') await assertNotSuspended(ctx, tx, challenge.subject_id);
    const tried = await tx
      .updateTable('otp_challenges')
      .set({ attempts: sql`attempts + 1`, ...(matches ? { consumed_at: now } : {}) })
      .where('id', '=', challenge.id)
      .where('consumed_at', 'is', null)
      .where('attempts', '<', MAX_OTP_ATTEMPTS)
      .executeTakeFirst();
    if (tried.numUpdatedRows === 0n || !matches) return null;
    return openSession(ctx, tx, { type: challenge.subject_type, id: challenge.subject_id }, 'main', now);
  });
  if (!session) {
    await forgiveRepeat(ctx, login, input.otp, now, countedIn);
    throw invalidOtp();
  }
  await clearLoginFailures(ctx, login);
  return session;
}

/**
 * Endpoint 3 (mock environment, load tests only): any registered payer confirms with the
 * static test OTP, with or without endpoint 1; the token works on the mock listener only.
 */
export async function confirmMockOtp(ctx: AppContext, input: { login: string; otp: string }) {
  const login = normaliseLogin(input.login);
  await countLoginAttempt(ctx, login, 'mock-otp');
  const subject = await findSubject(ctx, login);
  const staticOtp = ctx.config.stagingOtp;
  if (subject?.type !== 'payer' || staticOtp === null || !safeEqual(input.otp, staticOtp)) {
    throw invalidOtp();
  }
  const now = ctx.now();
  const session = await ctx.store.write((tx) => openSession(ctx, tx, subject, 'mock', now));
  // Load tests log the same payers in again and again: a success is not a failed attempt.
  await forgiveLoginAttempt(ctx, login, undefined, 'mock-otp');
  return session;
}

async function openSession(ctx: AppContext, tx: Tx, subject: { type: SubjectType; id: string }, audience: Audience, now: number) {
  const token = randomSecret(subject.type === 'merchant' ? 'lipa_mt_' : 'lipa_pt_');
  await tx
    .insertInto('sessions')
    .values({
      id: randomUUID(),
      token_hash: sha256Hex(token),
      subject_type: subject.type,
      subject_id: subject.id,
      audience,
      created_at: now,
      expires_at: now + ctx.config.tokenTtlSeconds * 1000,
    })
    .execute();
  return { token, tokenType: 'Bearer' as const, expiresIn: ctx.config.tokenTtlSeconds };
}
