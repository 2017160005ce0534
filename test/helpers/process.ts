import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { ADMIN_TOKEN } from './harness.js';

/** The service's entry point, as `npm start` runs it (from the sources). */
export const MAIN = ['--import', 'tsx', 'src/main.ts'];

/** A port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface Launched {
  child: ChildProcess;
  /** How the process ended. */
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** What it wrote to the collected stream so far. */
  output(): string;
}

/** The program started with `env` (and PATH) in a process of its own; what it writes to `stream` is collected. */
export function launch(env: Record<string, string>, stream: 'stdout' | 'stderr'): Launched {
  const child = spawn(process.execPath, MAIN, {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', stream === 'stdout' ? 'pipe' : 'ignore', stream === 'stderr' ? 'pipe' : 'ignore'],
  });
  let collected = '';
  child[stream]?.on('data', (chunk) => {
    collected += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => collected };
}

/** Resolves once the service answers /health; fails if it exits first or takes over 20 s. */
export async function waitUntilUp(url: string, child: ChildProcess, output: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}: ${output()}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`service did not start: ${output()}`);
}

export interface LipaProcess extends Launched {
  url: string;
  /** Sends `signal` (SIGTERM by default) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: string | null }>;
}

/**
 * The service in a process of its own (nothing shared with the test's process but the
 * database), on `port` (default: a free one), the main listener only. For what one process
 * cannot show: a crash, or two instances that share only their database.
 */
export async function startLipaProcess(env: Record<string, string>, port?: number): Promise<LipaProcess> {
  const listen = port ?? (await freePort());
  const launched = launch({ PORT: String(listen), MOCK_PORT: '0', ADMIN_TOKEN, LOG_LEVEL: 'warn', ...env }, 'stderr');
  const url = `http://127.0.0.1:${listen}`;
  try {
    await waitUntilUp(url, launched.child, launched.output);
  } catch (error) {
    launched.child.kill('SIGKILL');
    throw error;
  }
  return {
    ...launched,
    url,
    stop: async (signal = 'SIGTERM') => {
      if (launched.child.exitCode === null && launched.child.signalCode === null) launched.child.kill(signal);
      return launched.exited;
    },
  };
}
