import type { Migration } from 'kysely';
import * as m001 from './001_foundation.js';

/** Every migration, in order. Names never change once released. */
export const migrations: Record<string, Migration> = {
  '001_foundation': m001,
};
