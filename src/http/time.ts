/** A stored time (ms since the epoch) as the APIs write it: ISO 8601 in UTC, with milliseconds. */
export const isoTime = (ms: number): string => new Date(ms).toISOString();
