import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MAX_POINTS_OF_SALE } from '../src/pos/points-of-sale.js';
import { assertError as assertErrorBody, assertIso } from './helpers/assertions.js';
import {
  call,
  categoryId,
  createMerchant,
  createPayer,
  login,
  type MerchantSession,
  merchantSession,
  payerToken,
  posBody,
  type Reply,
  unique,
} from './helpers/client.js';
import { type Lipa, startLipa } from './helpers/harness.js';

/** Validation errors here must name the one bad field and nothing else. */
const assertError = (reply: Reply, status: number, code: string, field?: string) =>
  assertErrorBody(reply, status, code, field, { only: true });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const createPos = (lipa: Lipa, token: string, body: unknown) => call(lipa.url, 'POST', '/api/v1/points-of-sale', { token, body });
const listPos = (lipa: Lipa, token: string) => call(lipa.url, 'GET', '/api/v1/points-of-sale', { token });

describe('points of sale (endpoint 4)', () => {
  let lipa: Lipa;
  let alice: MerchantSession;
  let bob: MerchantSession;
  let category: string;

  before(async () => {
    lipa = await startLipa();
    [alice, bob] = await Promise.all([merchantSession(lipa), merchantSession(lipa)]);
    category = await categoryId(lipa);
  });
  after(() => lipa.close());

  test('201 echoes every field with posId, terminalId and createdAt', async () => {
    const body = posBody(alice.merchantId, category, { trustAllCertificates: true, description: 'Mboga na matunda' });
    const reply = await createPos(lipa, alice.token, body);
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(Object.keys(reply.body).sort(), [...Object.keys(body), 'posId', 'createdAt'].sort());
    for (const [field, value] of Object.entries(body)) assert.deepEqual(reply.body[field], value, field);
    assert.match(reply.body.posId, UUID);
    assert.equal(reply.body.terminalId, body.terminalId);
    assertIso(reply.body.createdAt);
    assert.ok(Math.abs(Date.parse(reply.body.createdAt) - Date.now()) < 60_000);

    const listed = await listPos(lipa, alice.token);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.find((p: { posId: string }) => p.posId === reply.body.posId),
      reply.body,
    );
  });

  test('GET lists only the caller’s own points of sale', async () => {
    const [carol, dan] = await Promise.all([merchantSession(lipa), merchantSession(lipa)]);
    const carolEmpty = await listPos(lipa, carol.token);
    assert.equal(carolEmpty.status, 200);
    assert.deepEqual(carolEmpty.body, []);

    const carols = [];
    for (let i = 0; i < 2; i++) {
      const reply = await createPos(lipa, carol.token, posBody(carol.merchantId, category));
      assert.equal(reply.status, 201, reply.text);
      carols.push(reply.body);
    }
    const dans = await createPos(lipa, dan.token, posBody(dan.merchantId, category));
    assert.equal(dans.status, 201, dans.text);

    const carolList = await listPos(lipa, carol.token);
    assert.equal(carolList.status, 200);
    assert.ok(Array.isArray(carolList.body));
    assert.deepEqual(carolList.body.map((p: { posId: string }) => p.posId).sort(), carols.map((p) => p.posId).sort());
    for (const pos of carolList.body) assert.equal(pos.merchantId, carol.merchantId);
    assert.deepEqual(
      [...carolList.body].sort((a, b) => a.posId.localeCompare(b.posId)),
      [...carols].sort((a, b) => a.posId.localeCompare(b.posId)),
    );

    const danList = await listPos(lipa, dan.token);
    assert.deepEqual(danList.body, [dans.body]);
  });

  test('merchantId of another merchant answers 403 forbidden and creates nothing', async () => {
    const [mallory, victim] = await Promise.all([merchantSession(lipa), merchantSession(lipa)]);
    const body = posBody(victim.merchantId, category);
    const reply = await createPos(lipa, mallory.token, body);
    assertError(reply, 403, 'forbidden');
    // Before the rules of the values: another merchant's point of sale is not the caller's to make.
    assertError(await createPos(lipa, mallory.token, { ...body, website: 'ftp://shop.example' }), 403, 'forbidden');

    assert.deepEqual((await listPos(lipa, victim.token)).body, []);
    assert.deepEqual((await listPos(lipa, mallory.token)).body, []);
    // The terminal id was not taken either: its rightful owner can still register it.
    const own = await createPos(lipa, victim.token, body);
    assert.equal(own.status, 201, own.text);
  });

  test('a terminalId already taken, by the same or another merchant, answers 409 terminal_id_taken', async () => {
    const first = await createPos(lipa, alice.token, posBody(alice.merchantId, category));
    assert.equal(first.status, 201, first.text);
    const terminalId = first.body.terminalId;
    const before = (await listPos(lipa, alice.token)).body;

    const again = await createPos(lipa, alice.token, posBody(alice.merchantId, category, { terminalId, posCompanyName: 'Another' }));
    assertError(again, 409, 'terminal_id_taken');

    const bobs = await createPos(lipa, bob.token, posBody(bob.merchantId, category, { terminalId }));
    assertError(bobs, 409, 'terminal_id_taken');

    assert.deepEqual((await listPos(lipa, alice.token)).body, before);
    assert.ok(!(await listPos(lipa, bob.token)).body.some((p: { terminalId: string }) => p.terminalId === terminalId));
  });

  test('two simultaneous registrations of one terminalId: one 201, one 409', async () => {
    const terminalId = unique('RACE');
    const replies = await Promise.all([
      createPos(lipa, alice.token, posBody(alice.merchantId, category, { terminalId })),
      createPos(lipa, bob.token, posBody(bob.merchantId, category, { terminalId })),
    ]);
    assert.deepEqual(replies.map((r) => r.status).sort(), [201, 409], replies.map((r) => r.text).join('\n'));
    const loser = replies.find((r) => r.status === 409) as Reply;
    assertError(loser, 409, 'terminal_id_taken');
  });

  test(`at most ${MAX_POINTS_OF_SALE} points of sale a merchant, even when asked for at once`, async () => {
    const carol = await merchantSession(lipa);
    const create = () => createPos(lipa, carol.token, posBody(carol.merchantId, category));
    const leave = 10;
    for (let made = 0; made < MAX_POINTS_OF_SALE - leave; made += 30) {
      const batch = await Promise.all(Array.from({ length: Math.min(30, MAX_POINTS_OF_SALE - leave - made) }, create));
      for (const reply of batch) assert.equal(reply.status, 201, reply.text);
    }
    const race = await Promise.all(Array.from({ length: 2 * leave }, create));
    assert.equal(race.filter((r) => r.status === 201).length, leave, 'exactly the cap is created');
    for (const refused of race.filter((r) => r.status !== 201)) assertError(refused, 409, 'too_many_points_of_sale');
    const listed = await listPos(lipa, carol.token);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.length, MAX_POINTS_OF_SALE, 'a refused point of sale is not stored');
    // Another merchant is not counted with this one.
    assert.equal((await createPos(lipa, bob.token, posBody(bob.merchantId, category))).status, 201);
  });

  test('an unknown categoryId answers 422 naming categoryId', async () => {
    const categories = (await call(lipa.url, 'GET', '/api/v1/categories')).body as Array<{ categoryId: string }>;
    let unknown = randomUUID();
    while (categories.some((c) => c.categoryId === unknown)) unknown = randomUUID();
    const before = (await listPos(lipa, alice.token)).body;

    const reply = await createPos(lipa, alice.token, posBody(alice.merchantId, unknown));
    assertError(reply, 422, 'validation_failed', 'categoryId');
    assert.deepEqual((await listPos(lipa, alice.token)).body, before);
  });

  test('each field missing, of the wrong type or malformed answers 422 validation_failed naming it; nothing is created', async () => {
    const merchant = await merchantSession(lipa);
    const fields = [
      'categoryId',
      'posCompanyName',
      'description',
      'website',
      'resultUrl',
      'serverUrl',
      'trustAllCertificates',
      'terminalId',
      'merchantId',
    ];
    const cases: Array<{ field: string; label: string; value?: unknown; missing?: true }> = [
      ...fields.map((field) => ({ field, label: 'missing', missing: true as const })),
      { field: 'categoryId', label: 'a number', value: 5411 },
      { field: 'categoryId', label: 'not a UUID', value: 'groceries' },
      { field: 'categoryId', label: 'a UUID with a bad character', value: '134a3105-73c3-50da-bf62-14670019ccdz' },
      { field: 'posCompanyName', label: 'a number', value: 42 },
      { field: 'posCompanyName', label: 'empty', value: '' },
      { field: 'posCompanyName', label: 'null', value: null },
      { field: 'posCompanyName', label: 'with a line break (it is one line on pages and prompts)', value: 'Duka\nLimited' },
      { field: 'posCompanyName', label: 'with a bell character', value: 'Duka\u0007' },
      { field: 'posCompanyName', label: 'with a right-to-left override', value: 'Duka \u202E00.1 SEK ' },
      { field: 'description', label: 'with an escape sequence', value: 'Fresh \u001b[31mfood' },
      { field: 'description', label: 'a number', value: 7 },
      { field: 'description', label: 'an object', value: { text: 'x' } },
      { field: 'website', label: 'a number', value: 1 },
      { field: 'website', label: 'a relative URL', value: '/shop' },
      { field: 'website', label: 'an ftp:// URL', value: 'ftp://duka.example/' },
      { field: 'website', label: 'a javascript: URL', value: 'javascript:alert(1)' },
      { field: 'resultUrl', label: 'a boolean', value: true },
      { field: 'resultUrl', label: 'a relative URL', value: 'lipa/result' },
      { field: 'resultUrl', label: 'an ftp:// URL', value: 'ftp://duka.example/result' },
      { field: 'resultUrl', label: 'a javascript: URL', value: 'javascript:alert(1)' },
      { field: 'resultUrl', label: 'a URL without a host', value: 'https://' },
      { field: 'resultUrl', label: 'a URL with a path where its host should be', value: 'https:///result' },
      { field: 'resultUrl', label: 'a URL on port 0', value: 'https://duka.example:0/result' },
      { field: 'serverUrl', label: 'an array', value: ['https://api.duka.example'] },
      { field: 'serverUrl', label: 'a relative URL', value: '//api.duka.example' },
      { field: 'serverUrl', label: 'an ftp:// URL', value: 'ftp://api.duka.example' },
      { field: 'serverUrl', label: 'a javascript: URL', value: 'javascript:alert(1)' },
      { field: 'trustAllCertificates', label: 'the string "true"', value: 'true' },
      { field: 'trustAllCertificates', label: 'the number 1', value: 1 },
      { field: 'trustAllCertificates', label: 'null', value: null },
      { field: 'terminalId', label: 'a number', value: 12345 },
      { field: 'terminalId', label: 'with spaces', value: 'T 0001' },
      { field: 'terminalId', label: '65 characters', value: 'T'.repeat(65) },
      { field: 'terminalId', label: 'empty', value: '' },
      { field: 'merchantId', label: 'a number', value: 1 },
      { field: 'merchantId', label: 'not a UUID', value: 'me' },
    ];
    const terminalIds: string[] = [];
    for (const c of cases) {
      const body: Record<string, unknown> = posBody(merchant.merchantId, category);
      if (c.missing) delete body[c.field];
      else body[c.field] = c.value;
      if (typeof body.terminalId === 'string') terminalIds.push(body.terminalId);
      const reply = await createPos(lipa, merchant.token, body);
      assertError(reply, 422, 'validation_failed', c.field);
      assert.ok(reply.body.error.message.includes(c.field), `${c.field} ${c.label}: message names the field: ${reply.body.error.message}`);
      // In words a merchant reads, not a regular expression or a JSON-schema keyword.
      assert.doesNotMatch(reply.body.error.message, /pattern|format "|\^/, `${c.field} ${c.label}`);
    }
    assert.deepEqual((await listPos(lipa, merchant.token)).body, []);
    const stored = await lipa.ctx.store.db.selectFrom('points_of_sale').select('id').where('terminal_id', 'in', terminalIds).execute();
    assert.deepEqual(stored, []);
    // The edge of the allowed terminalId: 64 characters is fine.
    const longest = await createPos(
      lipa,
      merchant.token,
      posBody(merchant.merchantId, category, { terminalId: `T${randomBytes(16).toString('hex')}`.padEnd(64, 'x') }),
    );
    assert.equal(longest.status, 201, longest.text);
  });

  test('every field whose value breaks a rule is named in one refusal', async () => {
    const reply = await createPos(
      lipa,
      alice.token,
      posBody(alice.merchantId, randomUUID(), {
        posCompanyName: '   ',
        description: 'Two\u001b[2J tills',
        website: 'ftp://shop.example',
        resultUrl: 'https://shop.example:0/cb',
        serverUrl: 'https://user:pw@shop.example',
      }),
    );
    assertError(reply, 422, 'validation_failed');
    assert.deepEqual(
      reply.body.error.details.map((d: { field: string }) => d.field),
      ['categoryId', 'posCompanyName', 'description', 'website', 'resultUrl', 'serverUrl'],
      reply.text,
    );
    assert.deepEqual(reply.body.error.details[3], { field: 'website', message: 'must be an absolute http(s) URL' });
    // Each other form of a URL that is not an absolute http(s) one is refused alike.
    for (const website of [
      'https:///x',
      'https:shop.example',
      'http:/shop.example',
      'http:.//shop.example',
      'not a url',
      'http://shop.example/a b',
      'mailto:shop@example.com',
    ]) {
      const refused = await createPos(lipa, alice.token, posBody(alice.merchantId, category, { website }));
      assertError(refused, 422, 'validation_failed');
      assert.deepEqual(refused.body.error.details, [{ field: 'website', message: 'must be an absolute http(s) URL' }], website);
    }
  });

  test('no token or a garbage token answers 401; nothing is created', async () => {
    const body = posBody(alice.merchantId, category);
    for (const token of [undefined, 'garbage', `${alice.token}x`]) {
      const created = await createPos(lipa, token as string, body);
      assertError(created, 401, 'unauthorized');
      assert.match(created.headers.get('www-authenticate') ?? '', /^Bearer/);
      assertError(await listPos(lipa, token as string), 401, 'unauthorized');
    }
    const malformedHeader = await call(lipa.url, 'GET', '/api/v1/points-of-sale', { headers: { authorization: `Basic ${alice.token}` } });
    assertError(malformedHeader, 401, 'unauthorized');
    assert.ok(!(await listPos(lipa, alice.token)).body.some((p: { terminalId: string }) => p.terminalId === body.terminalId));
  });

  test('a payer token answers 403 forbidden', async () => {
    const payer = await createPayer(lipa);
    const token = await payerToken(lipa, payer);
    assertError(await createPos(lipa, token, posBody(alice.merchantId, category)), 403, 'forbidden');
    assertError(await createPos(lipa, token, posBody(payer.payerId, category)), 403, 'forbidden');
    assertError(await listPos(lipa, token), 403, 'forbidden');
  });
});

describe('points of sale in production', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa({ LIPA_ENV: 'production', LIPA_MASTER_KEY: randomBytes(32).toString('hex'), MOCK_PORT: '0' });
  });
  after(() => lipa.close());

  test('an http:// resultUrl answers 422 while https:// works', async () => {
    const merchant = await createMerchant(lipa);
    const token = await login(lipa, merchant.login, merchant.password);
    const category = await categoryId(lipa);

    const insecure = posBody(merchant.merchantId, category, { resultUrl: 'http://duka.example/lipa/result' });
    assertError(await createPos(lipa, token, insecure), 422, 'validation_failed', 'resultUrl');
    assert.deepEqual((await listPos(lipa, token)).body, []);

    const secure = posBody(merchant.merchantId, category, { terminalId: insecure.terminalId });
    const reply = await createPos(lipa, token, secure);
    assert.equal(reply.status, 201, reply.text);
    assert.equal(reply.body.resultUrl, secure.resultUrl);
    assert.equal(reply.body.terminalId, insecure.terminalId);
  });
});
