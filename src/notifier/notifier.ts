import parsePhoneNumber from 'libphonenumber-js';
import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { MessageTable } from '../db/schema.js';
import { randomId } from '../security/tokens.js';

/** A message the service sends on its own behalf (OTPs, payment prompts). */
export type OutgoingMessage =
  | { channel: 'email'; purpose: string; to: string; subject: string; text: string }
  | { channel: 'sms'; purpose: string; to: string; text: string };

/**
 * The port through which the service's own messages leave. It writes inside the caller's
 * transaction, so a message is recorded exactly when the change that caused it commits
 * (transactional outbox).
 */
export interface Notifier {
  send(tx: Tx, message: OutgoingMessage, now: number): Promise<string>;
}

/**
 * The embedded outbox: with no SMTP or SMPP configured, storing the message is delivering
 * it. It is marked `delivered` and staging operators read it at GET /api/v1/admin/outbox.
 */
export class EmbeddedOutbox implements Notifier {
  async send(tx: Tx, message: OutgoingMessage, now: number): Promise<string> {
    const id = randomId('msg_');
    const phone = message.channel === 'sms' ? splitPhone(message.to) : null;
    const row: MessageTable = {
      id,
      merchant_id: null,
      purpose: message.purpose,
      type: message.channel,
      email: message.channel === 'email' ? message.to : null,
      subject: message.channel === 'email' ? message.subject : null,
      content_type: message.channel === 'email' ? 'text' : null,
      phone_country_code: phone?.countryCode ?? null,
      phone_number: phone?.number ?? null,
      content: message.text,
      status: 'delivered',
      created_at: now,
      updated_at: now,
    };
    await hotQuery(tx, 'outbox.insert', Object.values(row), () => tx.insertInto('messages').values(row));
    return id;
  }
}

/** Splits international digits (no plus) into calling code and national number. */
export function splitPhone(digits: string): { countryCode: string; number: string } {
  const parsed = parsePhoneNumber(`+${digits}`);
  if (parsed) return { countryCode: parsed.countryCallingCode, number: parsed.nationalNumber };
  return { countryCode: '', number: digits };
}
