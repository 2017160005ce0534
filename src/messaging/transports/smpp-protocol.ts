import smpp from 'smpp';
import { type DeliveryReceipt, PermanentSendError, TransientSendError } from './transport.js';

/**
 * SMPP 3.4 as the transport speaks it: addressing and data coding values, command statuses
 * (which are worth retrying), and delivery receipts read from a deliver_sm.
 */

export const TON_INTERNATIONAL = 1;
export const TON_NETWORK_SPECIFIC = 3;
export const NPI_ISDN = 1;
export const TON_ALPHANUMERIC = 5;
export const NPI_UNKNOWN = 0;
export const DATA_CODING_GSM = 0;
export const DATA_CODING_UCS2 = 8;
/** esm_class message type bits (2–5) of a deliver_sm. */
const ESM_TYPE_MASK = 0x3c;
const ESM_MC_DELIVERY_RECEIPT = 0x04;
const ESM_INTERMEDIATE_NOTIFICATION = 0x20;

export const STATUS = {
  ok: 0x00,
  invalidCommand: 0x03,
  invalidBindStatus: 0x04,
  systemError: 0x08,
  queueFull: 0x14,
  submitFailed: 0x45,
  throttled: 0x58,
  temporaryAppError: 0x64,
  unknownError: 0xff,
} as const;

/** command_status values worth retrying; every other rejection is for good. */
const TRANSIENT_STATUSES = new Set<number>([
  STATUS.invalidBindStatus,
  STATUS.systemError,
  STATUS.queueFull,
  STATUS.submitFailed,
  STATUS.throttled,
  STATUS.temporaryAppError,
  STATUS.unknownError,
]);

const STATUS_NAMES = new Map<number, string>(Object.entries(smpp.errors).map(([name, value]) => [value, name]));

const STATUS_TEXT = new Map<number, string>([
  [0x01, 'message length is invalid'],
  [0x04, 'not bound'],
  [0x08, 'system error'],
  [0x0a, 'invalid source address'],
  [0x0b, 'invalid destination address'],
  [0x0d, 'bind failed'],
  [0x0e, 'invalid password'],
  [0x0f, 'invalid system_id'],
  [0x14, 'message queue full'],
  [0x45, 'submit failed'],
  [0x48, 'invalid source address TON'],
  [0x49, 'invalid source address NPI'],
  [0x50, 'invalid destination address TON'],
  [0x51, 'invalid destination address NPI'],
  [0x58, 'throttled'],
  [0x64, 'temporary application error'],
  [0xff, 'unknown error'],
  [0x0104, 'invalid data_coding'],
]);

/** "ESME_RINVDSTADR (0x0B, invalid destination address)". */
export function describeStatus(status: number): string {
  const name = STATUS_NAMES.get(status) ?? 'command_status';
  const hex = `0x${status.toString(16).toUpperCase().padStart(2, '0')}`;
  const text = STATUS_TEXT.get(status);
  return `${name} (${hex}${text ? `, ${text}` : ''})`;
}

/**
 * The SMSC asks for fewer submits (ESME_RTHROTTLED): the message was not taken, and the whole
 * bind pauses before it is submitted again. (ESME_RMSGQFUL, often one subscriber's queue being
 * full, is that message's transient failure only, as Kannel reads it.)
 */
export class ThrottledSendError extends TransientSendError {
  /** Set by the transport: the number of the throttled submit_sm, in the order submits were written. */
  submitNumber = 0;
}

/** The error for a submit_sm answered with a non-zero command_status; the status is for the sender too. */
export function submitError(status: number): TransientSendError | PermanentSendError {
  const described = describeStatus(status);
  const message = `SMSC rejected submit_sm: ${described}`;
  const reason = `Refused by the SMS centre: ${described}.`;
  if (status === STATUS.throttled) return new ThrottledSendError(message, reason);
  return TRANSIENT_STATUSES.has(status) ? new TransientSendError(message, reason) : new PermanentSendError(message, reason);
}

/** message_state TLV values → the receipt text's stat names. */
const MESSAGE_STATES: Record<number, string> = {
  0: 'SCHEDULED',
  1: 'ENROUTE',
  2: 'DELIVRD',
  3: 'EXPIRED',
  4: 'DELETED',
  5: 'UNDELIV',
  6: 'ACCEPTD',
  7: 'UNKNOWN',
  8: 'REJECTD',
  9: 'SKIPPED',
};
/**
 * Not the message's final fate: reported by some SMSCs before the real receipt. ACCEPTD is
 * listed too: many SMSCs use it for "taken by the SMSC", and a later receipt settles it.
 */
const NON_FINAL_STATS = new Set(['SCHEDULED', 'ENROUTE', 'ACCEPTD']);

export interface ParsedReceipt extends DeliveryReceipt {
  /** False for intermediate notifications (ENROUTE, ACCEPTD, …), which are not passed on. */
  final: boolean;
}

/** Stats some SMSCs write out in full, as the standard's seven-letter names. */
const STAT_NAMES: Record<string, string> = {
  DELIVERED: 'DELIVRD',
  UNDELIVERABLE: 'UNDELIV',
  REJECTED: 'REJECTD',
  ACCEPTED: 'ACCEPTD',
};

/**
 * A deliver_sm as a delivery receipt, or null when it is not one. A receipt says so in its
 * esm_class (SMPP 3.4 §5.2.12: MC delivery receipt, or intermediate notification) or carries
 * the receipted_message_id TLV; anything else is a mobile-originated SMS, whatever its text
 * says (a phone's "id:… stat:UNDELIV" to a short code must not fail a message). Its id is
 * the TLV's, else the text's `id:`; its state the message_state TLV's, else the text's
 * `stat:`, and the one state decides both whether it is final and whether it was delivered.
 * A receipt with neither state is not final: nothing is known of the message's fate.
 */
export function parseDeliveryReceipt(pdu: Record<string, unknown>): ParsedReceipt | null {
  const esmType = (typeof pdu.esm_class === 'number' ? pdu.esm_class : 0) & ESM_TYPE_MASK;
  const text = messageText(pdu.message_payload) ?? messageText(pdu.short_message) ?? '';
  const tlvId = typeof pdu.receipted_message_id === 'string' && pdu.receipted_message_id !== '' ? pdu.receipted_message_id : undefined;
  const isReceipt = esmType === ESM_MC_DELIVERY_RECEIPT || esmType === ESM_INTERMEDIATE_NOTIFICATION || tlvId !== undefined;
  if (!isReceipt) return null;
  const providerId = tlvId ?? /(?:^|\s)id:(\S+)/i.exec(text)?.[1];
  if (providerId === undefined) return null;

  const textStat = /(?:^|\s)stat:(\S+)/i.exec(text)?.[1]?.toUpperCase();
  const textErr = /(?:^|\s)err:(\S+)/i.exec(text)?.[1];
  const tlvState = typeof pdu.message_state === 'number' ? pdu.message_state : undefined;
  const stat =
    tlvState !== undefined
      ? (MESSAGE_STATES[tlvState] ?? `STATE${tlvState}`)
      : textStat !== undefined
        ? (STAT_NAMES[textStat] ?? textStat)
        : null;
  return {
    providerId,
    delivered: stat === 'DELIVRD',
    detail: `${stat ?? 'UNKNOWN'}${textErr !== undefined ? ` err:${textErr}` : ''}`,
    final: stat !== null && esmType !== ESM_INTERMEDIATE_NOTIFICATION && !NON_FINAL_STATS.has(stat),
  };
}

/**
 * How the SMSC writes message ids, as Kannel's `msg-id-type` (SMPP_MSG_ID_TYPE): bit 0 set,
 * the submit_sm_resp's are hexadecimal (else decimal); bit 1 set, the receipts' are. Many
 * SMSCs answer a submit in hex and write its receipt in decimal ("1A2B" and "6699").
 */
export type MessageIdType = 0 | 1 | 2 | 3;

/**
 * A message id as a number written in decimal without leading zeros, so that the two forms
 * of one id meet: read as hexadecimal (`0x` allowed) when `hex`, or when it is not all
 * digits (as Kannel does); an id that is no number either way is kept as written.
 */
export function canonicalMessageId(written: string, hex: boolean): string {
  const id = written.trim();
  if (!hex && /^[0-9]{1,64}$/.test(id)) return BigInt(id).toString(10);
  const hexDigits = /^(?:0x)?([0-9a-f]{1,64})$/i.exec(id)?.[1];
  return hexDigits === undefined ? written : BigInt(`0x${hexDigits}`).toString(10);
}

/** A received short_message / message_payload (decoded by the package as `{ udh?, message }`) as text. */
function messageText(field: unknown): string | undefined {
  const value = field !== null && typeof field === 'object' && 'message' in field ? (field as { message: unknown }).message : field;
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (Buffer.isBuffer(value)) return value.length === 0 ? undefined : value.toString('latin1');
  return undefined;
}
