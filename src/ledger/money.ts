import { validationError } from '../http/errors.js';

/** Currencies the service settles in; amounts inside are integer minor units (cents). */
export const CURRENCY = 'KES';

/**
 * Converts an API amount (a JSON number in major units) to integer minor units without
 * floating-point arithmetic: the number's shortest decimal form is read as text.
 */
export function toMinorUnits(field: string, amount: number, max: number): number {
  if (typeof amount !== 'number' || !Number.isFinite(amount)) throw validationError(field, 'must be a number');
  if (amount <= 0) throw validationError(field, 'must be greater than 0');
  if (amount > max) throw validationError(field, `must be at most ${max}`);
  const text = String(amount);
  const match = /^([0-9]+)(?:\.([0-9]{1,2}))?$/.exec(text);
  if (!match) throw validationError(field, 'must have at most 2 decimal places');
  const [, whole = '0', fraction = ''] = match;
  return Number(whole) * 100 + Number(fraction.padEnd(2, '0'));
}

/** Minor units back to the API's decimal number (exact for every amount below 2^53 cents). */
export function fromMinorUnits(minor: number): number {
  return Number((minor / 100).toFixed(2));
}

/** The largest single deposit or starting balance, in major units. */
export const MAX_DEPOSIT = 10_000_000;
