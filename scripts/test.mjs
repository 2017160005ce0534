#!/usr/bin/env node
// `npm test`: run the test suite on SQLite, then on PostgreSQL; fail if either fails.
//
//   node scripts/test.mjs                      all test/**/*.test.ts, both databases
//   node scripts/test.mjs test/auth.test.ts    only the given files (or dirs)
//   LIPA_TEST_DB=sqlite node scripts/test.mjs  only one database (sqlite|postgres)
//
// Each run is `node --import tsx --test ...` with LIPA_TEST_DATABASE set to
// `sqlite` or to a PostgreSQL server URL; the test harness creates one fresh
// database per app it starts. PostgreSQL is a throwaway cluster from
// pg-throwaway.mjs (binaries: LIPA_TEST_PG_BINDIR, else the ones npm installed, else
// the system's), or TEST_POSTGRES_URL if that is set. When a test file drives the
// browser, Chromium is checked first, and installed from Debian if missing and we
// are root (chromium.mjs).
//
// Plain Node ESM with no dependencies, so it works before anything is built.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureChromium, needsChromium } from './chromium.mjs';
import { startThrowawayPostgres } from './pg-throwaway.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const DATABASES = {
  sqlite: 'SQLite',
  postgres: 'PostgreSQL',
};

/** Set once we are asked to stop: finish the current run, start no new one. */
let interrupted = false;
/** The test runner currently running, to pass signals on to. */
let current = null;

async function main(args) {
  const databases = selectDatabases(process.env.LIPA_TEST_DB);
  const files = selectTestFiles(args.filter((a) => a !== '--'));
  // An empty run must never pass: a typo in a path or a moved test directory
  // would otherwise turn CI green without testing anything.
  if (files.length === 0) {
    fail(args.length > 0 ? `no test files found in: ${args.join(' ')}` : 'no test files found (test/**/*.test.ts)');
  }

  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      interrupted = true;
      current?.kill(signal);
    });
  }

  // Once for all the runs, before them; a missing browser fails its tests (noted below).
  const chromiumProblem = needsChromium(files.map((f) => path.resolve(root, f))) ? await ensureChromium() : null;

  const results = [];
  for (const db of databases) {
    if (interrupted) break;
    const started = performance.now();
    const result = db === 'sqlite' ? await runSqlite(files) : await runPostgres(files);
    results.push({ name: DATABASES[db], ...result, seconds: (performance.now() - started) / 1000 });
  }

  console.log('\n== summary ==');
  for (const r of results) {
    const status = r.ok ? 'PASS' : 'FAIL';
    console.log(`${status}  ${r.name.padEnd(10)} ${r.seconds.toFixed(1).padStart(6)}s${r.error ? `  (${r.error})` : ''}`);
  }
  if (chromiumProblem) console.log(`note: ${chromiumProblem}`);
  if (interrupted) {
    console.log('interrupted');
    return 130;
  }
  return results.every((r) => r.ok) ? 0 : 1;
}

function selectDatabases(value) {
  if (!value || value === 'both') return ['sqlite', 'postgres'];
  if (value in DATABASES) return [value];
  fail(`LIPA_TEST_DB must be sqlite or postgres (or unset for both), got: ${value}`);
}

/** The given files/dirs, or all of test/; *.test.ts only inside dirs; sorted. */
function selectTestFiles(args) {
  const targets = args.length > 0 ? args : [path.join(root, 'test')];
  const files = [];
  for (const target of targets) {
    const abs = path.resolve(target);
    if (!fs.existsSync(abs)) {
      if (args.length === 0) continue; // no test/ dir yet: reported as "no test files"
      fail(`no such test file or directory: ${target}`);
    }
    if (fs.statSync(abs).isDirectory()) files.push(...findTestFiles(abs));
    else files.push(abs);
  }
  // Relative to the repo root (where the runner runs) for readable output.
  const display = (f) => {
    const rel = path.relative(root, f);
    return rel.startsWith('..') || path.isAbsolute(rel) ? f : rel;
  };
  return [...new Set(files.map(display))].sort();
}

/** *.test.ts files below dir (skipping node_modules and dot-dirs). */
function findTestFiles(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && !entry.name.startsWith('.')) found.push(...findTestFiles(full));
    } else if (entry.isFile() && entry.name.endsWith('.test.ts')) {
      found.push(full);
    }
  }
  return found;
}

async function runSqlite(files) {
  console.log('\n== tests on SQLite ==\n');
  return runTests(files, 'sqlite');
}

async function runPostgres(files) {
  let pg;
  try {
    pg = await startThrowawayPostgres();
  } catch (err) {
    // Never skip silently: no PostgreSQL means the PostgreSQL run failed.
    console.error(`\n== tests on PostgreSQL: could not start PostgreSQL ==\n${err.message}`);
    return { ok: false, error: `could not start PostgreSQL: ${err.message.split('\n')[0]}` };
  }
  try {
    console.log(`\n== tests on PostgreSQL (${redact(pg.url)}; ${pg.server}) ==\n`);
    return await runTests(files, pg.url);
  } finally {
    await pg.stop();
  }
}

/** Run the node test runner once against one database; resolves to { ok, error? }. */
async function runTests(files, database) {
  const args = ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files];
  const code = await new Promise((resolve) => {
    current = spawn(process.execPath, args, {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, LIPA_TEST_DATABASE: database },
    });
    current.on('error', (err) => {
      console.error(`cannot start the test runner: ${err.message}`);
      resolve(1);
    });
    current.on('close', (code, signal) => resolve(code ?? 128 + (os.constants.signals[signal] ?? 0)));
  });
  current = null;
  return code === 0 ? { ok: true } : { ok: false, error: `exit code ${code}` };
}

/** Hide a password if TEST_POSTGRES_URL carries one. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

function fail(message) {
  console.error(`test: ${message}`);
  process.exit(1);
}

process.exitCode = await main(process.argv.slice(2));
