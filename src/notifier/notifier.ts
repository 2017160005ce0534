import parsePhoneNumber from 'libphonenumber-js';
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

/** Splits international digits (no plus) into calling code and national number. */
export function splitPhone(digits: string): { countryCode: string; number: string } {
  const parsed = parsePhoneNumber(`+${digits}`);
  if (parsed) return { countryCode: parsed.countryCallingCode, number: parsed.nationalNumber };
  return { countryCode: '', number: digits };
}
