/** A stored time (ms since the epoch) as the APIs write it: ISO 8601 in UTC, with milliseconds. */
export const isoTime = (ms: number): string => new Date(ms).toISOString();

/** {@link isoTime} for a time that may not have happened (revoked, suspended…): null stays null. */
export const isoTimeOrNull = (ms: number | null): string | null => (ms === null ? null : isoTime(ms));

/** An ISO 8601 instant with a date, a time and a zone: `2026-12-01T00:00:00Z`, `2026-12-01T03:00:00.5+03:00`. */
const INSTANT = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})$/i;

/** An API's instant as epoch milliseconds; undefined when it is not one (a date alone, no zone, 31 February…). */
export function parseInstant(value: string): number | undefined {
  const match = INSTANT.exec(value);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second = '00'] = match;
  const ms = Date.parse(value.toUpperCase());
  if (Number.isNaN(ms)) return undefined;
  // Date.parse rolls 2026-02-31 over to March: the fields must be what they say.
  const days = new Date(Date.UTC(Number(year), Number(month), 0)).getUTCDate();
  if (Number(month) < 1 || Number(month) > 12 || Number(day) < 1 || Number(day) > days) return undefined;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  return ms;
}
