import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MAX_ACTIVE_KEYS } from '../src/keys/keys.js';
import { assertError, assertIso } from './helpers/assertions.js';
import { call, createPayer, type MerchantSession, merchantSession, payerToken, type Reply } from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';

function assertNoContent(reply: Reply): void {
  assert.equal(reply.status, 204, reply.text);
  assert.equal(reply.text, '');
}

const sha256Hex = (value: string) => createHash('sha256').update(value).digest('hex');

interface KeyFamily {
  path: string;
  idField: 'keyId' | 'id';
  secretField: 'secret' | 'apiKey';
  listedFields: string[];
}

const SIGNING: KeyFamily = {
  path: '/api/v1/api-keys',
  idField: 'keyId',
  secretField: 'secret',
  listedFields: ['createdAt', 'keyId', 'name', 'revokedAt'],
};
const MESSAGING: KeyFamily = {
  path: '/api/v1/messaging-keys',
  idField: 'id',
  secretField: 'apiKey',
  listedFields: ['createdAt', 'id', 'name', 'prefix', 'revokedAt'],
};

describe('merchant keys (CONTRACT §4)', () => {
  let lipa: Lipa;
  let alice: MerchantSession;
  let bob: MerchantSession;

  before(async () => {
    lipa = await startLipa();
    [alice, bob] = await Promise.all([merchantSession(lipa), merchantSession(lipa)]);
  });
  after(() => lipa.close());

  const list = (family: KeyFamily, token: string) => call(lipa.url, 'GET', family.path, { token });
  const revoke = (family: KeyFamily, token: string, id: string) =>
    call(lipa.url, 'DELETE', `${family.path}/${encodeURIComponent(id)}`, { token });
  const listed = async (family: KeyFamily, token: string, id: string) => {
    const reply = await list(family, token);
    assert.equal(reply.status, 200, reply.text);
    return reply.body.find((k: Record<string, unknown>) => k[family.idField] === id);
  };

  test('POST /api/v1/api-keys answers exactly 201 {keyId, secret, createdAt}, with and without a name or body', async () => {
    const named = await call(lipa.url, 'POST', SIGNING.path, { token: alice.token, body: { name: 'Till 1' } });
    assert.equal(named.status, 201, named.text);
    assert.deepEqual(Object.keys(named.body).sort(), ['createdAt', 'keyId', 'secret']);
    assert.equal(typeof named.body.keyId, 'string');
    assert.ok(named.body.keyId.length >= 16);
    assert.match(named.body.secret, /^[0-9a-f]{64}$/);
    assertIso(named.body.createdAt);
    assert.ok(Math.abs(Date.parse(named.body.createdAt) - Date.now()) < 60_000);
    assert.equal((await listed(SIGNING, alice.token, named.body.keyId)).name, 'Till 1');

    const emptyObject = await call(lipa.url, 'POST', SIGNING.path, { token: alice.token, body: {} });
    assert.equal(emptyObject.status, 201, emptyObject.text);
    assert.match(emptyObject.body.secret, /^[0-9a-f]{64}$/);
    assert.equal((await listed(SIGNING, alice.token, emptyObject.body.keyId)).name, null);

    const noBody = await call(lipa.url, 'POST', SIGNING.path, { token: alice.token });
    assert.equal(noBody.status, 201, noBody.text);
    assert.match(noBody.body.secret, /^[0-9a-f]{64}$/);
    assert.equal((await listed(SIGNING, alice.token, noBody.body.keyId)).name, null);

    const ids = new Set([named.body.keyId, emptyObject.body.keyId, noBody.body.keyId]);
    const secrets = new Set([named.body.secret, emptyObject.body.secret, noBody.body.secret]);
    assert.equal(ids.size, 3);
    assert.equal(secrets.size, 3);
  });

  test('a bad key name, or a body that is not an object, answers 422 saying only what is wrong', async () => {
    for (const family of [SIGNING, MESSAGING]) {
      const before = (await list(family, alice.token)).body.length;
      for (const [name, message] of [
        [42, 'must be a string'],
        ['', 'must not be empty'],
      ] as const) {
        const reply = await call(lipa.url, 'POST', family.path, { token: alice.token, body: { name } });
        assertError(reply, 422, 'validation_failed', 'name');
        // Only what is wrong with the name: not the optional body's "must be null" or "anyOf".
        assert.deepEqual(reply.body.error.details, [{ field: 'name', message }], reply.text);
      }
      for (const raw of ['[]', '"Till 1"', '5', 'true']) {
        const reply = await call(lipa.url, 'POST', family.path, { token: alice.token, raw });
        assertError(reply, 422, 'validation_failed', 'body');
        assert.deepEqual(reply.body.error.details, [{ field: 'body', message: 'must be an object' }], `${raw}: ${reply.text}`);
      }
      assert.equal((await list(family, alice.token)).body.length, before);
    }
  });

  test('GET /api/v1/api-keys lists the caller’s keys without any secret', async () => {
    const created = await call(lipa.url, 'POST', SIGNING.path, { token: bob.token, body: { name: 'Bob till' } });
    assert.equal(created.status, 201, created.text);
    const reply = await list(SIGNING, bob.token);
    assert.equal(reply.status, 200);
    assert.ok(Array.isArray(reply.body));
    assert.deepEqual(reply.body, [{ keyId: created.body.keyId, name: 'Bob till', createdAt: created.body.createdAt, revokedAt: null }]);
    assert.ok(!reply.text.includes(created.body.secret));

    const alices = await list(SIGNING, alice.token);
    assert.ok(alices.body.length >= 1);
    for (const key of alices.body) {
      assert.deepEqual(Object.keys(key).sort(), SIGNING.listedFields);
      assert.notEqual(key.keyId, created.body.keyId);
    }
    assert.ok(!/secret/i.test(alices.text));
  });

  test('keys made in the same millisecond list in one fixed order: newest first, then by id', async () => {
    const carol = await merchantSession(lipa);
    for (const family of [SIGNING, MESSAGING]) {
      await Promise.all(Array.from({ length: 12 }, () => call(lipa.url, 'POST', family.path, { token: carol.token, body: {} })));
      const reply = await list(family, carol.token);
      const order = (k: Record<string, string>) => [k.createdAt, k[family.idField]].join(' ');
      const expected = [...reply.body].sort((a, b) => (order(a) < order(b) ? 1 : -1));
      assert.deepEqual(
        reply.body.map((k: Record<string, string>) => k[family.idField]),
        expected.map((k: Record<string, string>) => k[family.idField]),
        family.path,
      );
    }
  });

  test('POST /api/v1/messaging-keys answers exactly 201 {id, apiKey}; GET lists a prefix but never the key', async () => {
    const startedAt = Date.now();
    const named = await call(lipa.url, 'POST', MESSAGING.path, { token: alice.token, body: { name: 'Newsletter' } });
    assert.equal(named.status, 201, named.text);
    assert.deepEqual(Object.keys(named.body).sort(), ['apiKey', 'id']);
    assert.equal(typeof named.body.id, 'string');
    assert.equal(typeof named.body.apiKey, 'string');
    assert.ok(named.body.apiKey.length >= 32, 'an API key has enough entropy');

    const noBody = await call(lipa.url, 'POST', MESSAGING.path, { token: alice.token });
    assert.equal(noBody.status, 201, noBody.text);
    const emptyObject = await call(lipa.url, 'POST', MESSAGING.path, { token: alice.token, body: {} });
    assert.equal(emptyObject.status, 201, emptyObject.text);
    assert.equal(new Set([named.body.apiKey, noBody.body.apiKey, emptyObject.body.apiKey]).size, 3);

    const reply = await list(MESSAGING, alice.token);
    assert.equal(reply.status, 200);
    const created = [named.body, noBody.body, emptyObject.body];
    const names = ['Newsletter', null, null];
    for (const [i, key] of created.entries()) {
      const entry = reply.body.find((k: { id: string }) => k.id === key.id);
      assert.ok(entry, `${key.id} is listed`);
      assert.deepEqual(Object.keys(entry).sort(), MESSAGING.listedFields);
      assert.equal(entry.name, names[i]);
      assertIso(entry.createdAt);
      assert.ok(Date.parse(entry.createdAt) >= startedAt - 1000 && Date.parse(entry.createdAt) <= Date.now() + 1000);
      assert.equal(entry.revokedAt, null);
      assert.equal(typeof entry.prefix, 'string');
      assert.ok(entry.prefix.length > 0 && entry.prefix.length < key.apiKey.length / 2, 'the prefix is a short part of the key');
      assert.ok(key.apiKey.startsWith(entry.prefix));
      assert.ok(!reply.text.includes(key.apiKey));
    }
    assert.ok(!(await list(MESSAGING, bob.token)).body.some((k: { id: string }) => created.some((c) => c.id === k.id)));
  });

  for (const family of [SIGNING, MESSAGING]) {
    test(`DELETE ${family.path}/{id} answers 204, the key is listed with revokedAt, and again 204`, async () => {
      const created = await call(lipa.url, 'POST', family.path, { token: alice.token, body: { name: 'to revoke' } });
      assert.equal(created.status, 201, created.text);
      const id = created.body[family.idField];

      const started = Date.now();
      assertNoContent(await revoke(family, alice.token, id));
      const revoked = await listed(family, alice.token, id);
      assert.ok(revoked, 'a revoked key is still listed');
      assertIso(revoked.revokedAt);
      assert.ok(Date.parse(revoked.revokedAt) >= Date.parse(revoked.createdAt));
      assert.ok(Math.abs(Date.parse(revoked.revokedAt) - started) < 60_000);

      assertNoContent(await revoke(family, alice.token, id));
      const again = await listed(family, alice.token, id);
      assert.equal(again.revokedAt, revoked.revokedAt, 'revoking twice keeps the first revocation time');
    });

    test(`DELETE ${family.path}/{id} of another merchant’s key or an unknown id answers 404; the key stays live`, async () => {
      const created = await call(lipa.url, 'POST', family.path, { token: alice.token, body: { name: 'not yours' } });
      assert.equal(created.status, 201, created.text);
      const id = created.body[family.idField];

      assertError(await revoke(family, bob.token, id), 404, 'not_found');
      assertError(await revoke(family, alice.token, `${id}0`), 404, 'not_found');
      assertError(await revoke(family, alice.token, 'nope'), 404, 'not_found');
      const still = await listed(family, alice.token, id);
      assert.equal(still.revokedAt, null);
      const row = await lipa.ctx.store.db
        .selectFrom(family === SIGNING ? 'api_keys' : 'messaging_keys')
        .select('revoked_at')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(row.revoked_at, null);
    });

    test(`${family.path}: at most ${MAX_ACTIVE_KEYS} keys not revoked, even when asked for at once; revoking one makes room`, async () => {
      const carol = await merchantSession(lipa);
      const replies = await Promise.all(
        Array.from({ length: MAX_ACTIVE_KEYS + 5 }, (_, i) =>
          call(lipa.url, 'POST', family.path, { token: carol.token, body: { name: `k${i}` } }),
        ),
      );
      const created = replies.filter((r) => r.status === 201);
      assert.equal(created.length, MAX_ACTIVE_KEYS, 'exactly the cap is created');
      for (const refused of replies.filter((r) => r.status !== 201)) assertError(refused, 409, 'too_many_keys');
      assert.equal((await list(family, carol.token)).body.length, MAX_ACTIVE_KEYS, 'a refused key is not stored');

      const otherKind = family === SIGNING ? MESSAGING : SIGNING;
      const other = await call(lipa.url, 'POST', otherKind.path, { token: carol.token });
      assert.equal(other.status, 201, `each kind has its own cap: ${other.text}`);

      assertNoContent(await revoke(family, carol.token, created[0]?.body[family.idField]));
      const again = await call(lipa.url, 'POST', family.path, { token: carol.token });
      assert.equal(again.status, 201, again.text);
      assertError(await call(lipa.url, 'POST', family.path, { token: carol.token }), 409, 'too_many_keys');
    });

    test(`${family.path}: no token answers 401, a payer token 403, on every route`, async () => {
      const payer = await createPayer(lipa);
      const payerSession = await payerToken(lipa, payer);
      const created = await call(lipa.url, 'POST', family.path, { token: alice.token });
      const id = created.body[family.idField];
      const routes: Array<[string, string]> = [
        ['POST', family.path],
        ['GET', family.path],
        ['DELETE', `${family.path}/${id}`],
      ];
      for (const [method, path] of routes) {
        const options = method === 'POST' ? { body: { name: 'x' } } : {};
        const anonymous = await call(lipa.url, method, path, options);
        assertError(anonymous, 401, 'unauthorized');
        assert.match(anonymous.headers.get('www-authenticate') ?? '', /^Bearer/);
        assertError(await call(lipa.url, method, path, { ...options, token: 'garbage-token' }), 401, 'unauthorized');
        assertError(await call(lipa.url, method, path, { ...options, token: payerSession }), 403, 'forbidden');
      }
      assert.equal((await listed(family, alice.token, id)).revokedAt, null);
    });
  }

  test('at rest: a signing secret is stored encrypted, bound to its key id', async () => {
    const created = await call(lipa.url, 'POST', SIGNING.path, { token: alice.token, body: { name: 'at rest' } });
    assert.equal(created.status, 201, created.text);
    const { keyId, secret } = created.body;
    const row = await lipa.ctx.store.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirstOrThrow();
    assert.equal(row.merchant_id, alice.merchantId);
    for (const [column, value] of Object.entries(row)) {
      assert.ok(!String(value).includes(secret), `column ${column} does not hold the secret`);
      assert.ok(!String(value).includes(Buffer.from(secret).toString('base64')), `column ${column} does not hold the secret in base64`);
    }
    assert.equal(lipa.ctx.secretBox.open(row.secret_enc, keyId), secret);
    assert.throws(() => lipa.ctx.secretBox.open(row.secret_enc, `${keyId}x`), 'the ciphertext only opens for its own key id');

    const other = await call(lipa.url, 'POST', SIGNING.path, { token: alice.token });
    const otherRow = await lipa.ctx.store.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', other.body.keyId)
      .executeTakeFirstOrThrow();
    assert.notEqual(otherRow.secret_enc, row.secret_enc);
  });

  test('at rest: a messaging key is stored as its SHA-256 only', async () => {
    const created = await call(lipa.url, 'POST', MESSAGING.path, { token: alice.token, body: { name: 'hashed' } });
    assert.equal(created.status, 201, created.text);
    const { id, apiKey } = created.body;
    const row = await lipa.ctx.store.db.selectFrom('messaging_keys').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.merchant_id, alice.merchantId);
    assert.equal(row.key_hash, sha256Hex(apiKey));
    assert.match(row.key_hash, /^[0-9a-f]{64}$/);
    for (const [column, value] of Object.entries(row)) {
      assert.ok(!String(value).includes(apiKey), `column ${column} does not hold the API key`);
    }
  });
});
