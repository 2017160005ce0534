#!/usr/bin/env node
// `npm run pack:client [-- <dir>]`: the merchant client alone, as an npm package with no
// dependencies (`lipa-client-<version>.tgz`, written to <dir>, default the current one).
//
// The client is src/client (node:crypto and fetch only). Installing the whole `lipa` package
// for it would bring the service's dependencies (a native SQLite build among them), so this
// compiles those files alone and packs them under the name `lipa-client`.
//
// Plain Node ESM: it needs only the TypeScript compiler from devDependencies.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const destination = path.resolve(process.argv.slice(2).find((a) => a !== '--') ?? '.');
const { version, license, engines } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'lipa-client-'));
try {
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const compiled = spawnSync(
    process.execPath,
    [
      tsc,
      ...['--outDir', path.join(stage, 'dist'), '--rootDir', path.join(root, 'src', 'client')],
      ...[
        '--target',
        'ES2022',
        '--module',
        'NodeNext',
        '--moduleResolution',
        'NodeNext',
        '--types',
        'node',
        '--typeRoots',
        path.join(root, 'node_modules', '@types'),
      ],
      ...['--strict', '--declaration', '--skipLibCheck', '--verbatimModuleSyntax'],
      path.join(root, 'src', 'client', 'index.ts'),
    ],
    { cwd: stage, stdio: 'inherit' },
  );
  if (compiled.status !== 0) throw new Error(`tsc exited ${compiled.status}`);

  const manifest = {
    name: 'lipa-client',
    version,
    description: 'Merchant client for Lipa: signs payment requests, calls create and status, verifies callbacks',
    license,
    type: 'module',
    engines,
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    types: './dist/index.d.ts',
    files: ['dist', 'signing.md'],
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  fs.copyFileSync(path.join(root, 'docs', 'signing.md'), path.join(stage, 'signing.md'));

  fs.mkdirSync(destination, { recursive: true });
  const packed = spawnSync('npm', ['pack', '--silent', '--pack-destination', destination], { cwd: stage, encoding: 'utf8' });
  if (packed.status !== 0) throw new Error(`npm pack exited ${packed.status}: ${packed.stderr}`);
  console.log(path.join(destination, packed.stdout.trim().split('\n').at(-1)));
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
