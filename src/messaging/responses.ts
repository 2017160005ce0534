import type { FastifyReply } from 'fastify';
import { type TSchema, Type } from 'typebox';
import type { MessageTable } from '../db/schema.js';
import { shown } from '../http/errors.js';
import { isoTime } from '../http/time.js';

/**
 * Every answer of the messaging API, in the interface's own shapes (seed, endpoints 7 and 8;
 * CONTRACT §8). They are not uniform, on purpose: objects with status/message/error_code,
 * an object with reason, and a bare JSON string. This file is the only place they are made.
 */
const EMAIL_MESSAGES: Record<string, string> = {
  queued: 'Email accepted and queued for delivery',
  sent: 'Email sent successfully',
  delivered: 'Email sent successfully',
  failed: 'Email accepted, but the mail server refused it; see GET /api/messages/{id}',
};
const SMS_MESSAGES: Record<string, string> = {
  queued: 'SMS accepted and queued for delivery',
  sent: 'SMS sent successfully',
  delivered: 'SMS sent successfully',
  failed: 'SMS accepted, but the SMS centre refused it; see GET /api/messages/{id}',
};

export const messagingReply = {
  emailAccepted: (reply: FastifyReply, id: string, status: string) =>
    reply.code(200).send({ status: 'success', message: EMAIL_MESSAGES[status] ?? 'Email accepted', id }),

  emailBadRequest: (reply: FastifyReply, message: string) => reply.code(400).send({ status: 'error', message }),

  /**
   * The quirk of the interface: a 500 whose body is a plain JSON string (the address cut at
   * 320). With `storedId`, the address passed the checks but the mail server refused it as
   * not existing; the message is kept (failed) under that id.
   */
  emailInvalidRecipient: (reply: FastifyReply, address: string, storedId?: string) =>
    reply
      .code(500)
      .type('application/json; charset=utf-8')
      .send(
        JSON.stringify(
          `The recipient email address is invalid: ${shown(address, 320)}${
            storedId ? ` (the mail server refused it; message ${storedId})` : ''
          }`,
        ),
      ),

  smsAccepted: (reply: FastifyReply, id: string, status: string) =>
    reply.code(201).send({ message: SMS_MESSAGES[status] ?? 'SMS accepted', data: { status, id } }),

  badRequest: (reply: FastifyReply, message: string) => reply.code(400).send({ status: 'error', message, error_code: 'bad_request' }),

  unauthorized: (reply: FastifyReply) =>
    reply.code(401).send({ status: 'error', message: 'A valid api_key header is required.', error_code: 'unauthorized' }),

  rateLimited: (reply: FastifyReply, retryAfterSeconds: number) =>
    reply
      .code(429)
      .header('retry-after', String(retryAfterSeconds))
      .send({
        status: 'error',
        message: `Too many requests for this api_key; retry in ${retryAfterSeconds} s.`,
        error_code: 'rate_limited',
      }),

  /** The only refusal of ours the messaging API has: also what a stopping instance answers, saying so. */
  internalError: (reply: FastifyReply, message = 'Something went wrong on our side; retry later.') =>
    reply.code(500).send({ status: 'error', message, error_code: 'internal_server_error' }),

  found: (reply: FastifyReply, message: MessageTable) => reply.code(200).send({ data: toStoredMessage(message) }),

  lookupAuthenticationFailed: (reply: FastifyReply, reason: string) => reply.code(401).send({ message: 'Authentication failed', reason }),

  accessDenied: (reply: FastifyReply) => reply.code(403).send({ message: 'Access to this message is denied.' }),

  /** An unknown message; with `message`, no such endpoint under the messaging API (same shape). */
  notFound: (reply: FastifyReply, message = 'Message not found.') => reply.code(404).send({ message, error_code: 'not_found' }),
};

/** The phone number as the lookup shows it: masked but for the last three digits. */
export function maskNumber(number: string): string {
  return number.length <= 3 ? number : `${'*'.repeat(number.length - 3)}${number.slice(-3)}`;
}

/** A stored message as GET /api/messages/{id} shows it. */
export function toStoredMessage(m: MessageTable) {
  const reason = m.status === 'failed' ? m.failure_reason : null;
  const common = {
    id: m.id,
    status: m.status,
    type: m.type,
    content: m.content,
    created_at: isoTime(m.created_at),
    ...(reason === null ? {} : { error: reason }),
  };
  if (m.type === 'sms') {
    return {
      ...common,
      segments: m.segments,
      phone: { number: maskNumber(m.phone_number ?? ''), country_code: m.phone_country_code ?? '' },
    };
  }
  return { ...common, email: m.email, subject: m.subject, content_type: m.content_type };
}

const Refused = (description: string) =>
  Type.Object({ status: Type.Literal('error'), message: Type.String(), error_code: Type.Optional(Type.String()) }, { description });
const Phone = Type.Object({ number: Type.String({ description: 'Masked but for the last three digits' }), country_code: Type.String() });

/** A message as GET /api/messages/{id} shows it (its `data`), and each entry of GET /api/v1/messages. */
export const StoredMessage = Type.Object({
  id: Type.String(),
  status: Type.String({ description: 'queued, sent, delivered or failed' }),
  type: Type.String({ description: 'email or sms' }),
  content: Type.String(),
  created_at: Type.String(),
  error: Type.Optional(Type.String({ description: 'Only when failed: the refusal, the receipt, or that it was given up on' })),
  // Present by type (the columns are shared by both types, hence nullable in the table).
  segments: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { description: 'SMS only' })),
  phone: Type.Optional(Phone),
  email: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Email only' })),
  subject: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Email only' })),
  content_type: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Email only: text or html' })),
});

/**
 * The answers above as OpenAPI describes them. Only for the description (the routes send
 * the objects above as they are; a response schema would have Fastify re-serialise them).
 */
export const messagingResponseDocs: Record<'send' | 'lookup', Record<number, TSchema>> = {
  send: {
    200: Type.Object(
      { status: Type.Literal('success'), message: Type.String(), id: Type.String() },
      { description: 'Email accepted; message says whether it is queued or sent' },
    ),
    201: Type.Object(
      {
        message: Type.String(),
        data: Type.Object({ status: Type.String({ description: 'queued, sent, delivered or failed' }), id: Type.String() }),
      },
      { description: 'SMS accepted' },
    ),
    400: Refused('Invalid request (an email refusal has no error_code)'),
    401: Refused('Missing, unknown or revoked api_key'),
    429: Refused('Too many requests for this api_key (Retry-After)'),
    500: Type.Union(
      [
        Type.String({
          description: 'An invalid email recipient: a bare JSON string (also when the mail server refuses the address as not existing)',
        }),
        Refused('Server error'),
      ],
      {
        description: 'An invalid email recipient (a bare JSON string), or a server error',
      },
    ),
  },
  lookup: {
    200: Type.Object({ data: StoredMessage }, { description: 'The message' }),
    400: Refused('Malformed request: an Expect other than 100-continue, or a query value with a NUL (%00)'),
    401: Type.Object({ message: Type.Literal('Authentication failed'), reason: Type.String() }, { description: 'Missing or bad api_key' }),
    403: Type.Object({ message: Type.String() }, { description: "Another account's message" }),
    404: Type.Object({ message: Type.String(), error_code: Type.Literal('not_found') }, { description: 'Unknown message' }),
    429: Refused('Too many requests for this api_key (Retry-After); GET and POST share the limit'),
    500: Refused('Server error (the database unavailable: Retry-After)'),
  },
};
