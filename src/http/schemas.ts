import { Type } from 'typebox';

/** Shared pieces of route schemas, also what /openapi.json shows. */
export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
    }),
    requestId: Type.String(),
  },
  { $id: 'ErrorResponse', description: 'The error body of every auth, operator and payment endpoint.' },
);

export const errorRef = Type.Ref('ErrorResponse');

/** Response schemas for the given error statuses, all of the one error shape. */
export function errors(...statuses: number[]): Record<number, typeof errorRef> {
  return Object.fromEntries(statuses.map((s) => [s, errorRef]));
}

export const bearerAuth = [{ bearerAuth: [] }];
export const adminAuth = [{ adminToken: [] }];

/** What a refusal says for each pattern, registered with the pattern itself (toAppError reads it). */
const patternSays = new Map<string, string>();

/** A string that must match `pattern`; a value that does not is refused with `says` ("must be …"). */
export function patternString(pattern: string, says: string, options: Parameters<typeof Type.String>[0] = {}) {
  patternSays.set(pattern, says);
  return Type.String({ ...options, pattern });
}

/** The words for a pattern made with patternString. */
export const whatPatternSays = (pattern: string): string | undefined => patternSays.get(pattern);

/**
 * An absolute http(s) URL, as the validator takes it: a string of at most 2,048 characters.
 * Its form is one of the handler's rules (`assertHttpUrl`), checked with the body's other
 * rules, so that one 422 names every field at fault (a URL not http(s) is one of CONTRACT
 * §6's). `/openapi.json` shows the form as well: `httpUrlDocumented`.
 */
export function httpUrl(description?: string) {
  return Type.String({ maxLength: 2048, ...(description ? { description } : {}) });
}

/** The same field as /openapi.json describes it, for a route's `bodyDocs`. */
export function httpUrlDocumented(description?: string) {
  return Type.String({ ...httpUrl(description), format: 'uri', pattern: '^[hH][tT][tT][pP][sS]?://' });
}
