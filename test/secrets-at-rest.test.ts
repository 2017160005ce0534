import assert from 'node:assert/strict';
import { createHmac, randomBytes, scryptSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import type { PaymentRequest } from '../src/client/index.js';
import {
  call,
  clientFor,
  createPayer,
  lastOtpSentTo,
  login,
  merchantSession,
  merchantWithPos,
  payerToken,
  paymentBody,
} from './helpers/client.js';
import { ADMIN_TOKEN, type Lipa, ON_POSTGRES, startLipa } from './helpers/harness.js';

/** Every text value of every table, read straight from the database. */
async function everyStoredValue(lipa: Lipa): Promise<string[]> {
  const db = lipa.ctx.store.db;
  const tables = ON_POSTGRES
    ? (await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = 'public'`.execute(db)).rows
    : (await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)).rows;
  const values: string[] = [];
  for (const { name } of tables) {
    const rows = (await sql<Record<string, unknown>>`select * from ${sql.table(name)}`.execute(db)).rows;
    for (const row of rows) for (const value of Object.values(row)) values.push(String(value));
  }
  return values;
}

describe('secrets never rest in clear text, nor reach the logs', () => {
  let lipa: Lipa;
  const secrets: Record<string, string> = {};

  before(async () => {
    lipa = await startLipa({ LOG_LEVEL: 'trace' });
    const merchant = await merchantSession(lipa);
    secrets.password = merchant.password;
    secrets.merchantToken = merchant.token;
    const apiKey = await call(lipa.url, 'POST', '/api/v1/api-keys', { token: merchant.token, body: {} });
    secrets.signingSecret = apiKey.body.secret;
    const messagingKey = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token: merchant.token, body: {} });
    secrets.messagingKey = messagingKey.body.apiKey;
    const payer = await createPayer(lipa, { pin: '90817' });
    secrets.pin = payer.pin;
    secrets.payerToken = await payerToken(lipa, payer);
    // A second login whose emailed OTP we read and use: it must not appear in the logs.
    await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
    secrets.otp = await lastOtpSentTo(lipa, merchant.login);
    secrets.secondToken = await login(lipa, merchant.login, merchant.password);
    secrets.adminToken = ADMIN_TOKEN;
  });
  after(() => lipa.close());

  test('the database holds no password, PIN, OTP, token, signing secret or messaging key', async () => {
    const stored = await everyStoredValue(lipa);
    assert.ok(stored.length > 50, 'the dump read real rows');
    for (const [name, secret] of Object.entries(secrets)) {
      if (name === 'adminToken') continue;
      // A PIN or an OTP is a few digits, which a timestamp or a sealed (base64) text may hold
      // by chance: it counts only standing alone, as it would stored in the clear.
      const found = /^[0-9]+$/.test(secret)
        ? (value: string) => new RegExp(`(?<![\\w-])${secret}(?![\\w-])`).test(value)
        : (value: string) => value.includes(secret);
      assert.ok(!stored.some(found), `${name} is stored in clear text`);
    }
  });

  test('no log line contains a secret', () => {
    assert.ok(lipa.logs.length > 10, 'the service logged its requests');
    for (const [name, secret] of Object.entries(secrets)) {
      // A PIN or an OTP is a few digits, which a timestamp or a request id may contain by
      // chance: it counts only standing alone, as it would in a body or a query string.
      const found = /^[0-9]+$/.test(secret)
        ? (line: string) => new RegExp(`(?<![0-9a-fA-F-])${secret}(?![0-9a-fA-F-])`).test(line)
        : (line: string) => line.includes(secret);
      assert.ok(!lipa.logs.some(found), `${name} appears in the logs`);
    }
  });

  test('log lines are JSON and carry the request id', () => {
    const requestLines = lipa.logs.map((line) => JSON.parse(line)).filter((entry) => entry.req);
    assert.ok(requestLines.length > 0);
    for (const entry of requestLines) assert.equal(typeof entry.reqId, 'string');
  });
});

describe('passwords and PINs are hashed with a pepper from LIPA_MASTER_KEY', () => {
  let lipa: Lipa;

  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  const scryptOf = (secret: string | Buffer, salt: string) =>
    scryptSync(secret, Buffer.from(salt, 'base64url'), 32, { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }).toString('base64url');
  const pinHashOf = async (payerId: string) =>
    (await lipa.ctx.store.db.selectFrom('payers').select('pin_hash').where('id', '=', payerId).executeTakeFirstOrThrow()).pin_hash;

  test('the database alone cannot test a guess: scrypt of the PIN is not what is stored', async () => {
    const payer = await createPayer(lipa, { pin: '4826' });
    const [scheme, n, r, p, salt = '', hash] = (await pinHashOf(payer.payerId)).split('$');
    assert.deepEqual([scheme, n, r, p], ['scrypt-hmac', '32768', '8', '1']);
    assert.notEqual(scryptOf(payer.pin, salt), hash, 'the right PIN, without the pepper, does not match');
    const pepper = createHmac('sha256', lipa.ctx.config.masterKey).update('lipa/password-pepper').digest();
    assert.equal(scryptOf(createHmac('sha256', pepper).update(payer.pin).digest(), salt), hash, 'with it, it does');
  });

  test('a hash of the earlier scheme (scrypt of the PIN) still signs in and approves, and is replaced at its first use', async () => {
    for (const use of ['sign-in', 'approval'] as const) {
      const payer = await createPayer(lipa, { pin: '7391', balance: 10 });
      const token = use === 'approval' ? await payerToken(lipa, payer) : '';
      const salt = randomBytes(16).toString('base64url');
      const legacy = ['scrypt', 32768, 8, 1, salt, scryptOf(payer.pin, salt)].join('$');
      await lipa.ctx.store.db.updateTable('payers').set({ pin_hash: legacy }).where('id', '=', payer.payerId).execute();
      if (use === 'sign-in') {
        const wrong = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: '0000' } });
        assert.equal(wrong.status, 401, wrong.text);
        assert.equal(await pinHashOf(payer.payerId), legacy, 'a wrong PIN replaces nothing');
        await payerToken(lipa, payer);
      } else {
        const shop = await merchantWithPos(lipa);
        const created = await clientFor(lipa.url, shop).createPayment(
          paymentBody(shop, { amount: 1, payer: { method: 'phone', value: payer.phone } }) as PaymentRequest,
        );
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const paymentId = (created.body as { paymentIdentifier: string }).paymentIdentifier;
        const accepted = await call(lipa.url, 'POST', `/api/v1/wallet/payments/${paymentId}/accept`, { token, body: { pin: payer.pin } });
        assert.equal(accepted.status, 200, accepted.text);
      }
      const upgraded = await pinHashOf(payer.payerId);
      assert.match(upgraded, /^scrypt-hmac\$/, `${use}: replaced by the peppered scheme`);
      // And the new hash works.
      await payerToken(lipa, payer);
    }
  });
});
