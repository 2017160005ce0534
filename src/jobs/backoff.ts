/**
 * The delay before the next try after `attempts` failed ones: `baseMs` doubling each time up
 * to `maxMs`, with ±`jitter` (a fraction, 20 % by default) so that failures that happened
 * together retry apart.
 */
export function backoffMs(baseMs: number, attempts: number, maxMs: number, jitter = 0.2): number {
  const delay = Math.min(baseMs * 2 ** (attempts - 1), maxMs);
  return Math.round(delay * (1 - jitter + Math.random() * 2 * jitter));
}
