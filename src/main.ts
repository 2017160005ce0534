// The program. Signal handlers come first, before the service's modules load: a SIGTERM that
// arrives while it starts (loading, migrating) ends it with exit code 0, as one that arrives
// later does after draining, never with the default 143. Nothing is being served yet then, and
// anything half done (a migration's transaction) is rolled back, as after a crash.
let stop: ((signal: string) => Promise<void>) | null = null;

function onSignal(signal: NodeJS.Signals): void {
  if (stop) {
    void stop(signal);
    return;
  }
  process.stderr.write(`lipa: ${signal} while starting; stopped before serving anything\n`);
  process.exit(0);
}
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

const { main } = await import('./service.js');
stop = await main();
