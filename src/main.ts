// The program. Signal handlers come first, before the service's modules load, so that a
// SIGTERM or SIGINT never meets Node's default (exit code 143 with nothing drained):
// - after the start, it drains (service.ts) and exits 0;
// - during the start, it waits for the start to finish, then drains the same way, so that a
//   migration or a first request under way completes;
// - if the start is stuck (a database that does not answer), it exits 0 after STUCK_MS:
//   nothing is being served then.

/** How long a signal during the start waits for the start before the process simply ends. */
const STUCK_MS = 5000;

let stop: ((signal: string) => Promise<void>) | null = null;
let requested: NodeJS.Signals | null = null;
let stuck: NodeJS.Timeout | undefined;

function onSignal(signal: NodeJS.Signals): void {
  if (stop) {
    void stop(signal);
    return;
  }
  if (requested) return;
  requested = signal;
  stuck = setTimeout(() => {
    process.stderr.write(`lipa: ${signal} while starting, and the start did not finish in ${STUCK_MS / 1000} s; stopped\n`);
    process.exit(0);
  }, STUCK_MS).unref();
}
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

const { main } = await import('./service.js');
stop = await main();
// Started: the drain runs to its end, however long it takes.
clearTimeout(stuck);
if (requested) void stop(requested);
