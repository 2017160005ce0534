// Chromium for the browser tests. test/helpers/browser.ts drives Debian's Chromium through
// playwright-core and never downloads a browser build; `npm test` (scripts/test.mjs) calls
// ensureChromium() once before its test runs, which installs Debian's package when it is
// missing and we are root with apt-get, and otherwise says in one line what to run.
//
// Plain Node ESM with no dependencies, like test.mjs.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

const DEBIAN_CHROMIUM = '/usr/bin/chromium';
/** Where test/helpers/browser.ts looks for it (keep the two in step). */
const CHROMIUM = process.env.CHROMIUM_PATH || DEBIAN_CHROMIUM;
/** The browser and a font for the pages' text (the screenshots and the layout checks). */
const PACKAGES = ['chromium', 'fonts-dejavu-core'];
const INSTALL = `apt-get install -y --no-install-recommends ${PACKAGES.join(' ')}`;

/** Whether any of the test files drives the browser (imports the browser helper). */
export function needsChromium(files) {
  return files.some((file) => /helpers\/browser(\.js|\.ts)?['"]/.test(fs.readFileSync(file, 'utf8')));
}

/**
 * Make sure Chromium is where the browser tests look for it, installing Debian's package as
 * root. Returns null when it is there, else one line on why the browser tests will fail.
 * Never skips them: without Chromium they fail, so a run without a browser is never green.
 */
export async function ensureChromium() {
  if (fs.existsSync(CHROMIUM)) return null;

  if (CHROMIUM !== DEBIAN_CHROMIUM) {
    return say(`Chromium not found at CHROMIUM_PATH=${CHROMIUM}: the browser tests will fail (point it at a Chromium, or unset it)`);
  }
  const hasAptGet = spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
  if (!hasAptGet) {
    return say(`Chromium not found at ${CHROMIUM}: the browser tests will fail; install Chromium and set CHROMIUM_PATH to it`);
  }
  if (process.getuid?.() !== 0) {
    return say(`Chromium not found at ${CHROMIUM}: the browser tests will fail; run: sudo apt-get update && sudo ${INSTALL}`);
  }

  console.log(`test: Chromium not found at ${CHROMIUM}, installing Debian's: apt-get update && ${INSTALL}`);
  const started = performance.now();
  // Waits for the dpkg lock if another apt-get is at work, rather than failing at once.
  const lock = ['-o', 'DPkg::Lock::Timeout=300'];
  const failed = (await apt(['update', ...lock])) ?? (await apt(['install', ...lock, '-y', '--no-install-recommends', ...PACKAGES]));
  if (failed) {
    console.error(failed);
    return say(`Chromium could not be installed (apt-get's output above): the browser tests will fail; run: ${INSTALL}`);
  }
  if (!fs.existsSync(CHROMIUM)) {
    return say(`apt-get installed ${PACKAGES.join(' ')}, but there is no ${CHROMIUM}: the browser tests will fail`);
  }
  const version = spawnSync(CHROMIUM, ['--version'], { encoding: 'utf8', timeout: 30_000 }).stdout?.trim();
  console.log(`test: installed ${version || CHROMIUM} in ${((performance.now() - started) / 1000).toFixed(1)}s`);
  return null;
}

function say(line) {
  console.log(`test: ${line}`);
  return line;
}

/** Run apt-get quietly; resolves to null on success, else its command and the tail of its output. */
function apt(args) {
  return new Promise((resolve) => {
    const child = spawn('apt-get', ['-q', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve(`apt-get ${args[0]}: ${err.message}`));
    child.on('close', (code, signal) => {
      if (code === 0) resolve(null);
      else
        resolve(`apt-get ${args.join(' ')} failed (${signal ?? `exit code ${code}`}):\n${output.trim().split('\n').slice(-40).join('\n')}`);
    });
  });
}
