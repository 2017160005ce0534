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

/** An absolute http(s) URL; the scheme is checked again in code (https only in production). */
export function httpUrl(description?: string) {
  return Type.String({ format: 'uri', maxLength: 2048, pattern: '^[hH][tT][tT][pP][sS]?://', ...(description ? { description } : {}) });
}
