import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { LipaClient } from '../src/client/index.js';
import { createPayer, merchantWithPos, paymentBody } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';

/**
 * The merchant client as merchants get it: `npm run pack:client` makes a package with no
 * dependencies; a fresh project installs the tarball (offline: there is nothing to fetch),
 * imports it, type-checks against it in strict TypeScript, and pays through a live service.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const execFileAsync = promisify(execFile);
const run = (command: string, args: string[], cwd: string) =>
  execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

describe('the lipa-client package', () => {
  let dir: string;
  let project: string;
  let lipa: Lipa;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lipa-client-test-'));
    const tarball = run(process.execPath, [join(root, 'scripts', 'pack-client.mjs'), dir], root).trim();
    project = join(dir, 'merchant');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'merchant', private: true, type: 'module' }));
    run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], project);
    lipa = await startLipa();
  });
  after(async () => {
    await lipa?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('it has no dependencies and carries only the compiled client and its docs', () => {
    const installed = join(project, 'node_modules');
    assert.deepEqual(
      readdirSync(installed).filter((name) => !name.startsWith('.')),
      ['lipa-client'],
      'nothing but the client is installed',
    );
    assert.deepEqual(readdirSync(join(installed, 'lipa-client')).sort(), ['dist', 'package.json', 'signing.md']);
  });

  test('imported by name, it signs the worked example of docs/signing.md and pays through a live service', async () => {
    const merchant = await merchantWithPos(lipa);
    const payer = await createPayer(lipa, { balance: 10 });
    const body = paymentBody(merchant, { amount: 2.5, payer: { method: 'phone', value: payer.phone } });
    writeFileSync(
      join(project, 'pay.mjs'),
      `import { LipaClient, signRequest } from 'lipa-client';
const example = signRequest({
  keyId: 'key_4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e',
  secret: '9f2b7c4e1a8d3f6b0c5e2a7d4f1b8c3e6a9d2f5b8e1c4a7d0f3b6e9c2a5d8f1b',
  method: 'POST',
  url: 'https://pay.example.com/api/public/v1/merchant-payments',
  body: process.argv[2],
  timestamp: 1767225600,
  nonce: '5f0c1e9a2b7d4c3e8f6a1b0d',
});
const lipa = new LipaClient({ baseUrl: process.env.LIPA_URL, keyId: process.env.LIPA_KEY_ID, secret: process.env.LIPA_SECRET });
const created = await lipa.createPayment(JSON.parse(process.env.PAYMENT));
const status = await lipa.paymentStatus(created.body.paymentIdentifier);
console.log(JSON.stringify({ example, created: created.status, status: status.status, payment: status.body }));
`,
    );
    // The worked example's body, byte for byte as the doc gives it.
    const docBody = readFileSync(join(root, 'docs', 'signing.md'), 'utf8').match(/```json\n([\s\S]*?)\n```/)?.[1];
    assert.ok(docBody);
    // Asynchronously: the service runs in this process and must go on answering meanwhile.
    const { stdout: output } = await execFileAsync(process.execPath, ['pay.mjs', docBody], {
      cwd: project,
      encoding: 'utf8',
      env: { ...process.env, LIPA_URL: lipa.url, LIPA_KEY_ID: merchant.keyId, LIPA_SECRET: merchant.secret, PAYMENT: JSON.stringify(body) },
    });
    const result = JSON.parse(output);
    assert.equal(result.example['x-service-hash'], 'd7878625130de455575b80d5acafbeff394c19e6df7fd3a560a27cffccb4e5ef');
    assert.equal(result.example['x-service-signature'], 'ec7e8d954aaa3e9502b68d641d44dd0b2431ac15e24955a65344384994b5ba9a');
    assert.equal(result.created, 201);
    assert.equal(result.status, 200);
    assert.equal(result.payment.orderId, body.orderId);
    assert.equal(result.payment.status, 'pending');
    // The same payment, read with the in-repo client: the package is that client.
    const again = await new LipaClient({ baseUrl: lipa.url, keyId: merchant.keyId, secret: merchant.secret }).paymentStatus(
      result.payment.paymentIdentifier,
    );
    assert.deepEqual(again.body, result.payment);
  });

  test('its types resolve in strict TypeScript (nodenext and bundler resolution)', () => {
    writeFileSync(
      join(project, 'check.ts'),
      `import { LipaClient, type PaymentRequest, verifyCallback } from 'lipa-client';
const client: LipaClient = new LipaClient({ baseUrl: 'https://pay.example.com', keyId: 'key_x', secret: 'secret' });
const request: PaymentRequest = {
  terminalId: 'DUKA-001', currency: 'KES', amount: 1, orderId: 'o-1',
  payer: { method: 'phone', value: '254708000001' }, urls: { callbackUrl: 'https://duka.example/cb' },
};
export const pending: Promise<unknown> = client.createPayment(request);
export const ok: boolean = verifyCallback({ url: 'https://duka.example/cb', headers: {}, body: '', secret: 'secret' });
// @ts-expect-error amount must be a number
export const wrong: PaymentRequest = { ...request, amount: '1' };
`,
    );
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    for (const resolution of [
      ['--module', 'nodenext', '--moduleResolution', 'nodenext'],
      ['--module', 'esnext', '--moduleResolution', 'bundler'],
    ]) {
      run(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--skipLibCheck',
          '--target',
          'es2022',
          '--types',
          'node',
          '--typeRoots',
          join(root, 'node_modules', '@types'),
          ...resolution,
          'check.ts',
        ],
        project,
      );
    }
  });
});
