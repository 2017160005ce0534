import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { LogThrottle } from '../logger.js';
import { isDatabaseUnavailable } from './database.js';

/** The longest wait between two tries of a record (the database comes back, it is written within this). */
const MAX_WAIT_MS = 1_000;

/**
 * Writes the records of things already done outside the database (a message the server took,
 * a callback its receiver answered), again and again while the database is unavailable. Lost
 * to an outage, such a record would leave the lease to run out and the thing to be done a
 * second time; kept in memory and written as soon as the database is back, it is done once.
 */
export class OutageRecorder {
  /** Ids whose record is under way or waits for the database: this process must not claim their rows again meanwhile. */
  readonly waiting = new Set<string>();
  #stopping = false;
  readonly #logged = new LogThrottle();

  constructor(
    private readonly log: FastifyBaseLogger,
    /** What is recorded, for the log ("message attempts"). */
    private readonly what: string,
  ) {}

  /** The process is stopping: a record that fails from now on is not tried again. */
  stop(): void {
    this.#stopping = true;
  }

  /**
   * Runs `write` (told how many tries came before: one whose commit's answer was lost may
   * have been recorded after all) until it succeeds. Any error but the database being
   * unavailable, or a failure once stopping, is thrown.
   */
  async record<T>(id: string, write: (tries: number) => Promise<T>): Promise<T> {
    // Held from the first try: a write that is slow rather than failing may outlast the lease.
    this.waiting.add(id);
    try {
      for (let tries = 0; ; tries++) {
        try {
          return await write(tries);
        } catch (error) {
          if (!isDatabaseUnavailable(error) || this.#stopping) throw error;
          if (tries === 0 && this.#logged.due(this.what)) {
            this.log.warn({ err: error, id }, `database unavailable: ${this.what} are recorded once it is back`);
          }
          await sleep(Math.min(100 * 2 ** tries, MAX_WAIT_MS));
        }
      }
    } finally {
      this.waiting.delete(id);
    }
  }
}
