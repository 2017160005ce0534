import type { MessageTable } from '../db/schema.js';
import type { SecretBox } from '../security/secret-box.js';

/**
 * A login code's message (purpose `otp`) is stored sealed: AES-256-GCM under a key derived
 * from LIPA_MASTER_KEY, bound to the message's id. The database, its backups and its WAL
 * then never hold a usable code, only its hash (otp_challenges) and this sealed copy, which
 * the sender opens to hand the text to its transport, and the staging outbox to show it.
 * Once a real transport has taken it, the stored text keeps its shape with the digits hidden.
 */
export const holdsCode = (purpose: string): boolean => purpose === 'otp';

/** SecretBox's stored form; an OTP's own text never looks like it. */
const SEALED = /^v1\.[\w-]+\.[\w-]+\.[\w-]*$/;

/** The text to store for a new message: sealed when it holds a login code. */
export function storedText(box: SecretBox, purpose: string, id: string, text: string): string {
  return holdsCode(purpose) ? box.seal(text, id) : text;
}

/**
 * The message's text as it was written. Throws when a sealed text does not open (it was
 * sealed under another master key). A login code stored before codes were sealed, or
 * already hidden, is read as it is.
 */
export function readText(box: SecretBox, message: Pick<MessageTable, 'id' | 'purpose' | 'content'>): string {
  return holdsCode(message.purpose) && SEALED.test(message.content) ? box.open(message.content, message.id) : message.content;
}

/** An OTP's text with its code hidden, its shape kept. */
export const hideCodes = (text: string): string => text.replace(/\b[0-9]{6}\b/g, '******');
