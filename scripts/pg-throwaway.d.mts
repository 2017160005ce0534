/** Types for scripts/pg-throwaway.mjs (plain JS so that it runs without a build). */
export function startThrowawayPostgres(): Promise<{ url: string; stop: () => Promise<void> }>;
