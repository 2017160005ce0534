import { getCountries, getCountryCallingCode } from 'libphonenumber-js';
import type { Tx } from '../db/database.js';

/** A message the service sends on its own behalf (OTPs, payment prompts). */
export type OutgoingMessage =
  | { channel: 'email'; purpose: string; to: string; subject: string; text: string }
  | { channel: 'sms'; purpose: string; to: string; text: string };

/**
 * The port through which the service's own messages leave. It writes inside the caller's
 * transaction, so a message is recorded exactly when the change that caused it commits
 * (transactional outbox). The messaging subsystem (messaging/messenger.ts) implements it.
 */
export interface Notifier {
  send(tx: Tx, message: OutgoingMessage, now: number): Promise<string>;
}

/** Every country calling code libphonenumber knows (1 to 3 digits). */
const CALLING_CODES: ReadonlySet<string> = new Set(getCountries().map((country) => getCountryCallingCode(country)));

/**
 * Splits international digits (no plus) into calling code and national number. Calling
 * codes are a prefix code (no code is the start of another), so the first 1 to 3 digits
 * that are a code are the code; every digit is kept. Parsing the whole number with
 * libphonenumber costs about 10 µs, too much on the payment path.
 */
export function splitPhone(digits: string): { countryCode: string; number: string } {
  for (let length = 1; length <= 3; length++) {
    const code = digits.slice(0, length);
    if (CALLING_CODES.has(code)) return { countryCode: code, number: digits.slice(length) };
  }
  return { countryCode: '', number: digits };
}
