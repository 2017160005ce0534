import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../db/database.js';
import { whatPatternSays } from './schemas.js';

/**
 * The closed set of error codes of the auth, operator and payment APIs, and the one map
 * from code to HTTP status. The messaging API keeps the interface's own shapes (messaging/).
 */
const STATUS = {
  malformed_request: 400,
  request_timeout: 408,
  expectation_failed: 417,
  headers_too_large: 431,
  invalid_json: 422,
  validation_failed: 422,
  unsupported_media_type: 415,
  payload_too_large: 413,
  unauthorized: 401,
  invalid_credentials: 401,
  invalid_otp: 401,
  forbidden: 403,
  // Signed requests (CONTRACT §5): each failed check has its own code, all 403.
  signature_missing_header: 403,
  unknown_key: 403,
  stale_timestamp: 403,
  invalid_nonce: 403,
  nonce_reused: 403,
  body_hash_mismatch: 403,
  signature_mismatch: 403,
  invalid_pin: 403,
  pin_locked: 403,
  account_suspended: 403,
  not_found: 404,
  login_taken: 409,
  phone_taken: 409,
  terminal_id_taken: 409,
  idempotency_conflict: 409,
  payment_not_pending: 409,
  payment_not_refundable: 409,
  refund_window_closed: 409,
  insufficient_balance: 409,
  test_payer_without_money: 409,
  too_many_keys: 409,
  too_many_points_of_sale: 409,
  redelivery_limit: 409,
  rate_limited: 429,
  internal_error: 500,
  not_ready: 503,
  stopping: 503,
  database_unavailable: 503,
  busy: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof STATUS;

/** The largest request body read (413 beyond it). */
export const BODY_LIMIT = 64 * 1024;
const tooLarge = () => new AppError('payload_too_large', `The request body is over ${BODY_LIMIT / 1024} KiB, the most this API reads.`);

export interface FieldError {
  field: string;
  message: string;
}

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: FieldError[] };
  requestId: string;
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: FieldError[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  get status(): number {
    return STATUS[this.code];
  }
}

/**
 * Control characters (C0, DEL, C1), the Unicode line and paragraph separators, and the
 * bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): these
 * reorder the text shown after them, so "KES 1.00" could be made to read otherwise on the
 * wallet's approve card. (The plain direction marks, U+200E/U+200F, reorder nothing and pass.)
 */
const CONTROL = /[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/u;
/** The same but tab, line feed and carriage return: free text may have lines. */
const CONTROL_BUT_LINES = /(?![\t\n\r])[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

/** Whether a text has control characters (direction overrides included): any in a `line`, any but tab and line breaks in `text`. */
export function hasControlCharacters(value: string, kind: 'line' | 'text'): boolean {
  return kind === 'line' ? CONTROL.test(value) : CONTROL_BUT_LINES.test(value);
}

/**
 * Refuses (422) control characters in a text field: none in a name or a reference, which is
 * one line shown on pages, in prompts and in callbacks; only tab and line breaks in free text.
 */
export function assertText(field: string, value: string | undefined, kind: 'line' | 'text' | 'name'): void {
  if (value === undefined) return;
  // A name is a line that says something: not only spaces.
  if (kind === 'name' && value.trim() === '') throw validationError(field, 'must not be blank');
  if (hasControlCharacters(value, kind === 'name' ? 'line' : kind))
    throw validationError(
      field,
      kind === 'text'
        ? 'must not contain control characters (direction overrides included) other than tab and line breaks'
        : 'must not contain control characters (direction overrides included)',
    );
}

/**
 * A caller's value as an error message repeats it: whole up to `max` characters, else its
 * start and an ellipsis, so that a 20,000-character id does not come back 20,000 long.
 */
export function shown(value: string, max = 100): string {
  if (value.length <= max) return value;
  const start = value.slice(0, max);
  // Not half of a surrogate pair at the cut.
  return `${/[\ud800-\udbff]$/.test(start) ? start.slice(0, -1) : start}…`;
}

export function validationError(field: string, message: string): AppError {
  return new AppError('validation_failed', `${field} ${message}`, [{ field, message }]);
}

/**
 * Field rules run one after another, so that one refusal names every field at fault (as the
 * schema's does): a rule's validation_failed is kept, anything else thrown at once.
 */
export class FieldChecks {
  readonly #found: FieldError[] = [];

  /** Runs `rule`: its value, or undefined when it refused (kept for done()). */
  run<T>(rule: () => T): T | undefined {
    try {
      return rule();
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== 'validation_failed' || !error.details) throw error;
      this.#found.push(...error.details);
      return undefined;
    }
  }

  /** Throws validation_failed with every refusal kept, the first in the message. */
  done(): void {
    const [first] = this.#found;
    if (first) throw new AppError('validation_failed', `${first.field} ${first.message}`, this.#found);
  }
}

/** The one error body of CONTRACT §9. */
export function errorBody(error: AppError, requestId: string): ErrorBody {
  return {
    error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
    requestId,
  };
}

export function sendError(reply: FastifyReply, error: AppError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply
    .code(error.status)
    .type('application/json; charset=utf-8')
    .send(errorBody(error, String(reply.request.id)));
}

/** What the schemas' formats ask for, in words rather than a JSON-schema keyword. */
const FORMAT_SAYS: Record<string, string> = {
  email: 'must be an email address',
  uuid: 'must be a UUID',
};

/** "must be one of: pending, paid, declined" */
const oneOf = (values: readonly unknown[]): string => `must be one of: ${values.map((v) => String(v)).join(', ')}`;

/** What a JSON type is called in a sentence: "must be a whole number". */
const TYPE_SAYS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/** ajv's limit keywords in words ("must NOT have fewer than 8 characters" → "must be at least 8 characters long"). */
function limitSays(keyword: string, limit: number): string | undefined {
  switch (keyword) {
    case 'minLength':
      return limit === 1 ? 'must not be empty' : `must be at least ${limit} characters long`;
    case 'maxLength':
      return `must be at most ${limit} characters long`;
    case 'minimum':
      return `must be at least ${limit}`;
    case 'maximum':
      return `must be at most ${limit}`;
    case 'exclusiveMinimum':
      return `must be more than ${limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${limit}`;
    case 'minItems':
      return `must have at least ${limit} item${limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `must have at most ${limit} item${limit === 1 ? '' : 's'}`;
    default:
      return undefined;
  }
}

/** A validation failure in words: a choice's values, a pattern's own sentence (patternString), a format's, a limit's, a type's, or ajv's. */
function plainMessage(v: { keyword: string; params: unknown; message?: string }): string {
  const params = v.params as { pattern?: string; format?: string; allowedValues?: unknown[]; limit?: unknown; type?: unknown } | undefined;
  if (v.keyword === 'enum' && params?.allowedValues) return oneOf(params.allowedValues);
  if (v.keyword === 'type' && params?.type !== undefined) {
    // One type ("string"), or several: the schema's list, or ajv's "string,null".
    const types = Array.isArray(params.type) ? params.type.map(String) : String(params.type).split(',');
    return `must be ${types.map((type) => TYPE_SAYS[type] ?? type).join(' or ')}`;
  }
  const said =
    v.keyword === 'pattern' && params?.pattern !== undefined
      ? whatPatternSays(params.pattern)
      : v.keyword === 'format' && params?.format !== undefined
        ? FORMAT_SAYS[params.format]
        : typeof params?.limit === 'number'
          ? limitSays(v.keyword, params.limit)
          : undefined;
  return said ?? v.message ?? 'is invalid';
}

/** Turns anything thrown in a route (or by Fastify itself) into an AppError. */
export function toAppError(error: FastifyError | Error): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const fieldOf = (instancePath: string, missing?: string) =>
      [instancePath.replace(/^\//, '').replaceAll('/', '.'), missing].filter(Boolean).join('.') || fastifyError.validationContext || 'body';
    // A choice of constants (anyOf of const) fails once per constant: the anyOf says the choice once.
    const choices = new Map<string, unknown[]>();
    for (const v of fastifyError.validation) {
      if (v.keyword === 'const')
        choices.set(v.instancePath, [...(choices.get(v.instancePath) ?? []), (v.params as { allowedValue?: unknown }).allowedValue]);
    }
    const anyOfAt = new Set(fastifyError.validation.filter((v) => v.keyword === 'anyOf').map((v) => v.instancePath));
    // An optional body or field (a choice of a schema or null) that is there but wrong: its
    // own complaints say what is wrong; "must be null" and "must match a schema in anyOf" do not.
    const typeIs = (v: { keyword: string; params: unknown }, type: string) =>
      v.keyword === 'type' && (v.params as { type?: unknown }).type === type;
    const isNull = (v: { keyword: string; params: unknown }) => typeIs(v, 'null');
    const errors = fastifyError.validation;
    const nullable = (path: string) => errors.some((v) => v.instancePath === path && isNull(v));
    const deeper = (path: string) =>
      errors.some(
        (v) =>
          (v.instancePath.startsWith(`${path}/`) && v.keyword !== 'const') ||
          // Of a choice of something or null, the something's own complaint at the same place.
          (nullable(path) && v.instancePath === path && v.keyword !== 'anyOf' && v.keyword !== 'const' && !isNull(v)),
      );
    const details: FieldError[] = [];
    for (const v of fastifyError.validation) {
      if (v.keyword === 'const' && anyOfAt.has(v.instancePath)) continue;
      if (anyOfAt.has(v.instancePath) && deeper(v.instancePath)) {
        if (v.keyword === 'anyOf') continue;
        if (isNull(v)) continue;
      }
      const missing = (v.params as { missingProperty?: string } | undefined)?.missingProperty;
      const choice = v.keyword === 'anyOf' ? choices.get(v.instancePath) : undefined;
      // A query value is always text, unless the parameter came twice (`?limit=1&limit=2`).
      const repeated = fastifyError.validationContext === 'querystring' && typeIs(v, 'string');
      const message = missing ? 'is required' : choice ? oneOf(choice) : repeated ? 'must be given once' : plainMessage(v);
      const field = fieldOf(v.instancePath, missing);
      // The same complaint about the same field (two checks of one rule) is said once.
      if (!details.some((d) => d.field === field && d.message === message)) details.push({ field, message });
    }
    const first = details[0];
    const message = first ? `${first.field} ${first.message}` : 'The request is invalid.';
    return new AppError('validation_failed', message, details);
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return tooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'Send the body as application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_json', 'The JSON body is empty.');
  }
  if (fastifyError.statusCode === 400 && (error instanceof SyntaxError || fastifyError.code?.startsWith('FST_ERR_CTP'))) {
    // JSON syntax errors and __proto__ / constructor.prototype keys (refused by the parser).
    return notJson(error);
  }
  // @fastify/static (behind /docs) refuses a path with dot segments, a NUL or a name too long
  // with 403: it names no file, so it is the 404 of any path that serves nothing.
  if (fastifyError.statusCode === 404 || fastifyError.code === 'FST_STATIC_FORBIDDEN_PATH') return new AppError('not_found', 'Not found.');
  if (fastifyError.statusCode === 413) return tooLarge();
  if (fastifyError.statusCode === 415) return new AppError('unsupported_media_type', 'Send the body as application/json.');
  if (fastifyError.statusCode === 400) return new AppError('invalid_json', error.message);
  if (isDatabaseUnavailable(error))
    return new AppError('database_unavailable', 'The database is unavailable; retry in a few seconds.', undefined, {
      'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS),
    });
  return new AppError('internal_error', 'Something went wrong on our side; retry later.');
}

/** What a 503 database_unavailable asks the client to wait. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // No body at all (none sent, or an empty one) is not JSON: invalid_json, as for any other
  // body that is not JSON, rather than "body must be object".
  const appError =
    error.validation && error.validationContext === 'body' && request.body === undefined
      ? new AppError('invalid_json', 'The body is empty; send a JSON object.')
      : toAppError(error);
  logFailure(request, error, appError);
  return sendError(reply, appError);
}

/**
 * A failure on our side goes to the error log. At error, like any 5xx, database_unavailable
 * too: a lock held too long (SQLITE_BUSY) or a runaway query (out of memory) is as often a bug
 * as an outage, and must reach whoever watches the error log.
 */
export function logFailure(request: FastifyRequest, error: Error, appError: AppError): void {
  if (appError.code === 'internal_error') request.log.error({ err: error }, 'unhandled error');
  if (appError.code === 'database_unavailable') request.log.error({ err: error }, 'database unavailable');
}

/**
 * A body the parser refused, saying why in the parser's words, less the excerpt of the body
 * V8 quotes in some (`Unexpected token 'x', "{"pin":"1234"x}" is not valid JSON`): a body may
 * hold a password, and an answer that repeats it may end up in a client's or a proxy's log.
 */
export function notJson(error: Error): AppError {
  // `…, "<the whole body>" is not valid JSON` or `…, ..."<20 characters of it>"... is not valid JSON`
  const says = error.message.replace(/, .*is not valid JSON$/s, '');
  return new AppError('invalid_json', `The body is not acceptable JSON: ${says}`);
}
