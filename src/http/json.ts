import secureJson from 'secure-json-parse';
import { AppError, notJson } from './errors.js';

/** JSON is UTF-8: a body that is not valid UTF-8 is refused, not read with U+FFFD in it. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** In Unicode mode a surrogate pair is one code point, so this matches only a lone half. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Decimal digits a double always gives back as written (DBL_DIG). */
const EXACT_DIGITS = 15;

/**
 * A body that JSON.parse read, but not as the sender may have meant it. Carries what was
 * parsed, so that an API with its own error shapes can still tell which kind of request
 * it was (the messaging API answers an email and an SMS differently).
 */
export class AmbiguousJsonError extends AppError {
  constructor(
    problem: Problem,
    readonly parsed: unknown,
  ) {
    const at = problem.field === '' ? '' : ` (at ${problem.field})`;
    super(
      'invalid_json',
      `The body is not acceptable JSON: ${problem.says}${at}`,
      problem.field === '' ? undefined : [{ field: problem.field, message: problem.says }],
    );
  }
}

/** What is wrong, and where: the member's path (`payer.value`, `items.0`), empty at the top. */
interface Problem {
  says: string;
  field: string;
}

/**
 * Reads a request body as strict JSON: valid UTF-8, no `__proto__` or
 * `constructor.prototype` keys, and the I-JSON rules (RFC 7493) that keep a body from
 * meaning two things: no member name twice in one object (JSON.parse keeps the last one;
 * a signature, a log or an auditor may read the first), no lone surrogate (`"\ud800"`:
 * it cannot be stored or sent as UTF-8, and would come back as U+FFFD), no NUL character
 * (`"\u0000"`: PostgreSQL cannot store it, and no text field means it), and no number with
 * more than 15 significant digits (`0.10000000000000001` would silently become 0.1), nor one
 * out of a double's range (`1e400`, `1e-400`).
 * Throws AppError `invalid_json`.
 */
export function parseStrictJson(body: Uint8Array): unknown {
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(body);
  } catch (error) {
    throw notJson(error as Error);
  }
  try {
    parsed = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    // Valid JSON with a `__proto__` or `constructor.prototype` key: refused all the same, but
    // carrying what plain JSON.parse reads (an own member, no prototype touched), so that the
    // messaging API can still answer an email in the email shape.
    const plain = readable(text);
    if (plain === NOT_JSON) throw notJson(error as Error);
    throw new AmbiguousJsonError({ says: (error as Error).message, field: '' }, plain);
  }
  const problem = ambiguity(text);
  if (problem !== null) throw new AmbiguousJsonError(problem, parsed);
  return parsed;
}

const NOT_JSON = Symbol('not JSON');

function readable(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return NOT_JSON;
  }
}

/**
 * The first I-JSON problem in `text`, which JSON.parse has accepted (so the scan can trust
 * its structure), or null. One pass; member names are only sliced out when an object has
 * more than one.
 */
function ambiguity(text: string): Problem | null {
  // One frame per open container: the names seen so far in an object, null for an array;
  // and where the scan is in each: the member's name, or the element's index.
  const frames: Array<Set<string> | null> = [];
  const path: Array<string | number> = [];
  const at = (says: string): Problem => ({ says, field: path.join('.') });
  let expectName = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const start = i;
      let escaped = false;
      for (i++; text.charCodeAt(i) !== 0x22; i++) {
        if (text.charCodeAt(i) === 0x5c) {
          escaped = true;
          i++;
        }
      }
      // Only an escape can make a lone surrogate: the text came from strict UTF-8.
      const value = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : null;
      if (expectName) {
        expectName = false;
        const names = frames[frames.length - 1] as Set<string>;
        const name = value ?? text.slice(start + 1, i);
        path[path.length - 1] = name;
        if (names.has(name)) return at(`the member ${JSON.stringify(name)} appears twice in one object`);
        names.add(name);
      }
      // The string itself is not repeated: it may be a password.
      if (value !== null && LONE_SURROGATE.test(value)) return at(`a string has a lone surrogate (half of a UTF-16 pair)`);
      if (value?.includes('\u0000')) return at(`a string has a NUL character (\\u0000)`);
    } else if (c === 0x7b) {
      frames.push(new Set());
      path.push('');
      expectName = true;
    } else if (c === 0x5b) {
      frames.push(null);
      path.push(0);
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
      path.pop();
    } else if (c === 0x2c) {
      expectName = frames[frames.length - 1] !== null;
      if (!expectName) path[path.length - 1] = (path[path.length - 1] as number) + 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      let exponent = false;
      while (i + 1 < text.length && isNumberChar(text.charCodeAt(i + 1))) {
        i++;
        if ((text.charCodeAt(i) | 0x20) === 0x65) exponent = true;
      }
      // A shorter token cannot have too many digits: most numbers are not sliced out.
      if (i + 1 - start > EXACT_DIGITS && significantDigits(text.slice(start, i + 1)) > EXACT_DIGITS)
        return at(`the number ${text.slice(start, i + 1)} has more than ${EXACT_DIGITS} significant digits, more than can be read exactly`);
      // Only an exponent takes a number out of a double's range (1e400 would be Infinity, 1e-400 zero).
      if (exponent) {
        const token = text.slice(start, i + 1);
        const value = Number(token);
        if (!Number.isFinite(value) || (value === 0 && significantDigits(token) > 0))
          return at(`the number ${token} is out of the range a number can have here`);
      }
    }
  }
  return null;
}

/** 0-9 . e E + - */
const isNumberChar = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;

/** Digits of a JSON number's mantissa without its leading and trailing zeros. */
function significantDigits(token: string): number {
  const exponent = token.search(/[eE]/);
  const digits = (exponent === -1 ? token : token.slice(0, exponent)).replace(/[-.]/g, '');
  let first = 0;
  while (first < digits.length && digits.charCodeAt(first) === 0x30) first++;
  let last = digits.length;
  while (last > first && digits.charCodeAt(last - 1) === 0x30) last--;
  return last - first;
}
