import { createHmac, randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { deriveKey } from './secret-box.js';

const scrypt = promisify(scryptCallback) as (
  password: string | Buffer,
  salt: Buffer,
  keylen: number,
  options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

// scrypt N=2^15, r=8, p=1: the OWASP baseline; about 40 ms on this class of machine,
// off the event loop (libuv thread pool).
const PARAMS = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_LENGTH = 32;

/**
 * Hashes are `scrypt-hmac$N$r$p$salt$hash` (base64url): scrypt of the HMAC-SHA256 of the
 * password or PIN under a key derived from LIPA_MASTER_KEY (a pepper). A PIN has at most a
 * million values, so scrypt alone would let whoever copies the database (or a backup) try
 * them all in hours; without the master key, which is not in the database, they cannot try
 * one. `scrypt$…` (scrypt of the text itself) is what versions before this one wrote: it
 * still verifies, and is replaced at the next successful check (see `stale`).
 */
const SCHEME = 'scrypt-hmac';
const LEGACY_SCHEME = 'scrypt';

/** The pepper of a service: its master key's, derived once. */
const peppers = new WeakMap<Buffer, Buffer>();
export function pepperOf(ctx: Pick<AppContext, 'config'>): Buffer {
  const masterKey = ctx.config.masterKey;
  let pepper = peppers.get(masterKey);
  if (pepper === undefined) {
    pepper = deriveKey(masterKey, 'password-pepper');
    peppers.set(masterKey, pepper);
  }
  return pepper;
}

const peppered = (secret: string, pepper: Buffer) => createHmac('sha256', pepper).update(secret).digest();

/** Hashes a password or PIN (see SCHEME). */
export async function hashPassword(secret: string, pepper: Buffer): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scrypt(peppered(secret, pepper), salt, KEY_LENGTH, PARAMS);
  return [SCHEME, PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Whether a stored hash is of an older scheme, to be replaced once its secret is known right. */
export function stale(stored: string): boolean {
  return stored.startsWith(`${LEGACY_SCHEME}$`);
}

/**
 * A share of libuv's thread pool for one kind of check. scrypt runs on that pool (4 threads),
 * which DNS lookups and file work share; a flood of logins (each one an scrypt, unknown
 * logins included) would otherwise queue without bound in front of everything else: a
 * legitimate login, a payer's approval, a callback's DNS lookup. Each lane runs at most
 * `threads` checks at once and admits at most `waiting` more; beyond that a request is
 * refused at once with `503 busy` and Retry-After, rather than waiting seconds behind the
 * flood. Per process, like the pool itself.
 */
export class HashLane {
  /** Places taken: checks running, in line, or not yet asked for by their request. */
  #admitted = 0;
  #running = 0;
  readonly #line: Array<() => void> = [];

  constructor(
    private readonly threads: number,
    private readonly waiting: number,
  ) {}

  /**
   * Takes a place, first thing, so that a refusal costs the request nothing else (no count
   * towards a lockout, no read): `503 busy` when every place is taken. `done()` gives it back
   * and must be called once the request is through with it, whatever happened.
   */
  admit(): LanePlace {
    if (this.#admitted >= this.threads + this.waiting) {
      throw new AppError('busy', 'Too many sign-ins and approvals are being checked right now; retry in a second.', undefined, {
        'Retry-After': '1',
      });
    }
    this.#admitted++;
    let given = false;
    return {
      check: (work) => this.#run(work),
      done: () => {
        if (given) return;
        given = true;
        this.#admitted--;
      },
    };
  }

  async #run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running < this.threads) this.#running++;
    else await new Promise<void>((resolve) => this.#line.push(resolve));
    try {
      return await work();
    } finally {
      // The thread passes straight to the next in line, if any.
      const next = this.#line.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

/** A request's place in a HashLane. */
export interface LanePlace {
  /** Runs the check when a thread of the lane is free. */
  check<T>(work: () => Promise<T>): Promise<T>;
  done(): void;
}

/** Passwords and PINs checked at sign-in (endpoint 1 of the main listener): anyone can send these. */
export const SIGN_IN_CHECKS = new HashLane(2, 32);
/** The same on the mock environment's listener (staging load tests), apart: they cannot crowd out real sign-ins. */
export const MOCK_SIGN_IN_CHECKS = new HashLane(1, 32);
/** PINs checked to approve a payment: only signed-in payers send these. */
export const APPROVAL_CHECKS = new HashLane(2, 64);

/** Checks a password or PIN against its stored hash, in the thread the request's lane place gives it. */
export async function verifyPassword(secret: string, stored: string, place: LanePlace, pepper: Buffer): Promise<boolean> {
  return place.check(() => verifyScrypt(secret, stored, pepper));
}

async function verifyScrypt(secret: string, stored: string, pepper: Buffer): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if ((scheme !== SCHEME && scheme !== LEGACY_SCHEME) || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await scrypt(scheme === SCHEME ? peppered(secret, pepper) : secret, Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: PARAMS.maxmem,
  });
  return timingSafeEqual(actual, expected);
}

/**
 * A hash to verify against when the login is unknown, so that an unknown login costs the
 * same scrypt work as a wrong password and the two cannot be told apart by timing.
 */
export const DUMMY_PASSWORD_HASH = hashPassword(randomBytes(16).toString('hex'), randomBytes(32));
