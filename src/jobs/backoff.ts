/**
 * The delay before the next try after `attempts` failed ones: `baseMs` growing `factor`
 * times each time (doubling by default) up to `maxMs`, with ±20 % jitter so that failures
 * that happened together retry apart.
 */
export function backoffMs(baseMs: number, attempts: number, maxMs: number, factor = 2): number {
  const delay = Math.min(baseMs * factor ** (attempts - 1), maxMs);
  return Math.round(delay * (0.8 + Math.random() * 0.4));
}
