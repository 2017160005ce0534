/**
 * The delay before the next try after `attempts` failed ones: `baseMs` doubling each time up
 * to `maxMs`, with ±20 % jitter so that failures that happened together retry apart.
 */
export function backoffMs(baseMs: number, attempts: number, maxMs: number): number {
  const delay = Math.min(baseMs * 2 ** (attempts - 1), maxMs);
  return Math.round(delay * (0.8 + Math.random() * 0.4));
}
