import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/**
 * Debian's Chromium, which `npm test` installs when it runs as root (scripts/chromium.mjs, which
 * looks in the same place); a test tool never downloads a browser here.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * Launches headless Chromium the way this machine needs it: as root without the sandbox, and
 * with the background services that would try to reach the internet turned off.
 */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM}: apt-get install --no-install-recommends chromium fonts-dejavu-core ` +
        '(npm test does it when run as root), or set CHROMIUM_PATH',
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

export const PHONE = { width: 360, height: 780 };
export const DESKTOP = { width: 1280, height: 860 };
