import { Type } from 'typebox';
import { validationError } from './errors.js';
import { patternString } from './schemas.js';

export const MAX_LIMIT = 200;
export const DEFAULT_LIMIT = 50;
const LIMIT_SAYS = `must be a whole number from 1 to ${MAX_LIMIT}`;

/** The `limit` query parameter of the list endpoints: 1 to 200, default 50 (422 outside). */
export const LimitParam = Type.Optional(
  patternString('^[0-9]{1,3}$', LIMIT_SAYS, {
    description: `How many, newest first: 1 to ${MAX_LIMIT}; default ${DEFAULT_LIMIT}`,
  }),
);

export function limitOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_LIMIT;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw validationError('limit', LIMIT_SAYS);
  return limit;
}
