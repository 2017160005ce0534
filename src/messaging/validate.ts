import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { hasControlCharacters } from '../http/errors.js';
import { isSendableAddress } from './address.js';
import { countSegments } from './sms-segments.js';

/** Limits of the messaging API (documented in docs/api.md). */
export const LIMITS = {
  subject: 255,
  emailContent: 60_000,
  smsSegments: 10,
} as const;

export type ValidMessage =
  | { type: 'email'; email: string; subject: string; contentType: 'text' | 'html'; content: string }
  | { type: 'sms'; countryCode: string; number: string; content: string; segments: number };

/** Why a message request was refused; the route turns each into the interface's shape. */
export type Refusal =
  | { kind: 'bad_request'; type: 'email' | 'sms' | null; message: string }
  | { kind: 'invalid_recipient'; address: string };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Whether a parsed body is an email request (its refusals have the email shape). */
export const isEmailRequest = (body: unknown): boolean => isObject(body) && isObject(body.message) && body.message.type === 'email';

/**
 * Checks a POST /api/messages body: `{message: {type, content, …}}` with exactly one
 * recipient. Email addresses are checked with validator.js (RFC 5322 subset, with a TLD),
 * phone numbers with libphonenumber-js for the given country.
 */
export function validateMessage(body: unknown): ValidMessage | Refusal {
  if (!isObject(body) || !isObject(body.message)) return bad(null, 'The body must be a JSON object {"message": {...}}.');
  const m = body.message;
  if (m.type !== 'email' && m.type !== 'sms') return bad(null, 'message.type must be "email" or "sms".');
  if (typeof m.content !== 'string' || m.content.trim() === '') return bad(m.type, 'message.content is required.');
  return m.type === 'email' ? validateEmail(m) : validateSms(m);
}

function validateEmail(m: Record<string, unknown>): ValidMessage | Refusal {
  if (m.phone !== undefined) return bad('email', 'An email message has exactly one recipient, message.email; remove message.phone.');
  if (Array.isArray(m.email)) return bad('email', 'An email has exactly one recipient: message.email is one address, not a list.');
  if (typeof m.email !== 'string' || m.email.trim() === '') return bad('email', 'message.email is required: one recipient address.');
  if (/[,;]/.test(m.email)) return bad('email', 'message.email takes exactly one recipient address.');
  if (typeof m.subject !== 'string' || m.subject.trim() === '') return bad('email', 'message.subject is required.');
  if (m.subject.length > LIMITS.subject) return bad('email', `message.subject must be at most ${LIMITS.subject} characters.`);
  if (hasControlCharacters(m.subject, 'line'))
    return bad('email', 'message.subject must be one line, without control characters or direction overrides.');
  const contentType = m.content_type ?? 'text';
  if (contentType !== 'text' && contentType !== 'html') return bad('email', 'message.content_type must be "text" or "html".');
  const content = m.content as string;
  if (content.length > LIMITS.emailContent) return bad('email', `message.content must be at most ${LIMITS.emailContent} characters.`);
  const email = m.email.trim();
  if (!isSendableAddress(email)) return { kind: 'invalid_recipient', address: email };
  return { type: 'email', email, subject: m.subject, contentType, content };
}

function validateSms(m: Record<string, unknown>): ValidMessage | Refusal {
  if (m.email !== undefined) return bad('sms', 'An SMS has exactly one recipient, message.phone; remove message.email.');
  if (Array.isArray(m.phone)) return bad('sms', 'An SMS has exactly one recipient: message.phone is one object, not a list.');
  if (!isObject(m.phone)) return bad('sms', 'message.phone {country_code, number} is required.');
  const { country_code: countryCode, number } = m.phone;
  if (typeof countryCode !== 'string' || !/^[0-9]{1,3}$/.test(countryCode))
    return bad('sms', 'message.phone.country_code must be 1 to 3 digits.');
  if (typeof number !== 'string' || !/^[0-9]{4,14}$/.test(number)) return bad('sms', 'message.phone.number must be 4 to 14 digits.');
  const phone = parsePhoneNumberFromString(`+${countryCode}${number}`);
  if (!phone?.isValid()) return bad('sms', `+${countryCode} ${number} is not a valid phone number for that country code.`);
  const content = m.content as string;
  const { segments } = countSegments(content);
  if (segments > LIMITS.smsSegments)
    return bad('sms', `message.content is ${segments} SMS segments; at most ${LIMITS.smsSegments} are allowed.`);
  // Sent (and stored) in international form: a number written with its trunk prefix
  // (0712345678 for +254) would otherwise go to 2540712345678, which is nobody.
  return { type: 'sms', countryCode: phone.countryCallingCode, number: phone.nationalNumber, content, segments };
}

function bad(type: 'email' | 'sms' | null, message: string): Refusal {
  return { kind: 'bad_request', type, message };
}
