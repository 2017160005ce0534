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
// that database is used as is and nothing is started.
//
// Plain Node ESM with no dependencies on purpose: CI runs it before and
// independently of the TypeScript toolchain.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const NOT_FOUND_MESSAGE = 'PostgreSQL server binaries not found: apt-get install postgresql, or set TEST_POSTGRES_URL';

// Settings that make a disposable cluster fast. Durability is irrelevant:
// the data is deleted at the end of the run anyway.
const SERVER_SETTINGS = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=200'];

/** Clusters started by this process and not yet stopped, for exit cleanup. */
const running = new Set();

/**
 * Start a throwaway cluster (or reuse TEST_POSTGRES_URL if set).
 * @returns {Promise<{ url: string, stop: () => Promise<void> }>}
 */
export async function startThrowawayPostgres() {
  if (process.env.TEST_POSTGRES_URL) {
    return { url: process.env.TEST_POSTGRES_URL, stop: async () => {} };
  }

  const bindir = findServerBindir();
  if (!bindir) throw new Error(NOT_FOUND_MESSAGE);
  const initdb = path.join(bindir, 'initdb');
  const pgCtl = path.join(bindir, 'pg_ctl');

  // PostgreSQL refuses to run as root, so as root everything runs as the
  // `postgres` user (created by the Debian package) via runuser.
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const owner = asRoot ? lookupPostgresUser() : null;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lipa-pg-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'log');
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);

  const cluster = { dir, dataDir, pgCtl, asRoot, started: false, stopped: false };
  running.add(cluster);
  installExitHandlers();

  try {
    await run(asRoot, initdb, ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C'], dir);

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
        await run(asRoot, pgCtl, ['-D', dataDir, '-l', logFile, '-w', '-o', options, 'start'], dir);
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
      stop: async () => stopCluster(cluster),
    };
  } catch (err) {
    stopCluster(cluster);
    throw err;
  }
}

/** Directory holding initdb and pg_ctl, or null. */
function findServerBindir() {
  const hasServer = (dir) => Boolean(dir) && fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'));

  // 1. pg_config. On Debian /usr/bin/pg_config may come from libpq-dev alone
  //    and then points at a dir without server binaries, hence the check.
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (pgConfig.status === 0 && hasServer(pgConfig.stdout.trim())) return pgConfig.stdout.trim();

  // 2. Debian/Ubuntu layout: highest /usr/lib/postgresql/<version>/bin.
  const debianRoot = '/usr/lib/postgresql';
  if (fs.existsSync(debianRoot)) {
    const versions = fs
      .readdirSync(debianRoot)
      .filter((v) => hasServer(path.join(debianRoot, v, 'bin')))
      .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
    if (versions.length > 0) return path.join(debianRoot, versions[0], 'bin');
  }

  // 3. initdb on PATH. Resolve symlinks so pg_ctl is looked up next to the
  //    real binary (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin).
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'initdb');
    if (!dir || !fs.existsSync(candidate)) continue;
    const realDir = path.dirname(fs.realpathSync(candidate));
    if (hasServer(realDir)) return realDir;
    if (hasServer(dir)) return dir;
  }
  return null;
}

function lookupPostgresUser() {
  const id = (flag) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const uid = id('-u');
  const gid = id('-g');
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(
      'Running as root, but there is no `postgres` user to run PostgreSQL as ' +
        '(PostgreSQL refuses to run as root). Install the postgresql package, ' +
        'run as a non-root user, or set TEST_POSTGRES_URL.',
    );
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Command and args, wrapped in runuser when we are root. */
function asPostgres(asRoot, command, args) {
  return asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

/** Run a PostgreSQL tool; reject with its output if it fails. */
function run(asRoot, command, args, cwd) {
  const [cmd, argv] = asPostgres(asRoot, command, args);
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
    const [cmd, argv] = asPostgres(cluster.asRoot, cluster.pgCtl, ['-D', cluster.dataDir, '-m', 'immediate', '-w', 'stop']);
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
    console.log(`PostgreSQL running at ${pg.url}  (Ctrl-C to stop)`);
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
