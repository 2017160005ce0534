import { setTimeout as sleep } from 'node:timers/promises';
import { isDatabaseUnavailable } from './database.js';

/** The longest wait between two tries of a record (the database comes back, it is written within this). */
const MAX_WAIT_MS = 1_000;

/**
 * Writes the record of something already done outside the database (a message the server
 * took, a callback its receiver answered), again and again while the database is unavailable.
 * Lost to an outage, the record would leave the lease to run out and the thing to be done a
 * second time; kept in memory and written as soon as the database is back, it is done once.
 * Any other error, or a failure once `stopping()` says the process is stopping, is thrown.
 */
export async function recordThroughOutage<T>(
  write: () => Promise<T>,
  stopping: () => boolean,
  onOutage: (error: unknown) => void,
): Promise<T> {
  for (let tries = 0; ; tries++) {
    try {
      return await write();
    } catch (error) {
      if (!isDatabaseUnavailable(error) || stopping()) throw error;
      if (tries === 0) onOutage(error);
      await sleep(Math.min(100 * 2 ** tries, MAX_WAIT_MS));
    }
  }
}
