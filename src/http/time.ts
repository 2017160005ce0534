/** A stored time (ms since the epoch) as the APIs write it: ISO 8601 in UTC, with milliseconds. */
export const isoTime = (ms: number): string => new Date(ms).toISOString();

/** {@link isoTime} for a time that may not have happened (revoked, suspended…): null stays null. */
export const isoTimeOrNull = (ms: number | null): string | null => (ms === null ? null : isoTime(ms));
