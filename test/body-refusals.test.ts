import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from './helpers/assertions.js';
import { call, createPayer, merchantSession, payerToken } from './helpers/client.js';
import { ADMIN_TOKEN, type Lipa, startLipa } from './helpers/harness.js';
import { isPayerOperation, type OpenApiDocument, operationsOf, schemesOf } from './helpers/openapi-check.js';

describe('every operation that reads a JSON body refuses bad bodies alike', () => {
  let lipa: Lipa;
  before(async () => {
    lipa = await startLipa();
  });
  after(() => lipa.close());

  /** The token an operation takes: the operator's, the payer's (the wallet) or the merchant's; none to log in. */
  const sessions = async () => {
    const merchant = (await merchantSession(lipa)).token;
    const payer = await payerToken(lipa, await createPayer(lipa));
    const sessionFor = (operation: Record<string, unknown>, template: string): string | undefined => {
      const schemes = schemesOf(operation);
      if (schemes.includes('adminToken')) return ADMIN_TOKEN;
      if (!schemes.includes('bearerAuth')) return undefined;
      return isPayerOperation(template) ? payer : merchant;
    };
    return { merchant, sessionFor };
  };

  test('from /openapi.json: not JSON 415, over 64 KiB 413, unparseable 422 invalid_json, with the right session', async (t) => {
    const spec = (await call(lipa.url, 'GET', '/openapi.json')).body as OpenApiDocument;
    const { merchant, sessionFor } = await sessions();
    const checked: string[] = [];
    for (const [method, template, operation] of operationsOf(spec)) {
      // Signed routes answer 403 first and 422 for any body they cannot hash; the messaging API has its own shapes.
      if (!(operation.responses as Record<string, unknown>)['415']) continue;
      const what = `${method} ${template}`;
      const send = (raw: string, type = 'application/json') =>
        call(lipa.url, method.toUpperCase(), template.replace(/\{[^}]+\}/g, 'x'), {
          raw,
          token: sessionFor(operation, template),
          headers: { 'content-type': type },
        });
      await t.test(what, async () => {
        assertError(await send('x', 'text/plain'), 415, 'unsupported_media_type');
        assertError(await send(JSON.stringify({ filler: 'x'.repeat(65 * 1024) })), 413, 'payload_too_large');
        assertError(await send('{"login": '), 422, 'invalid_json');
      });
      checked.push(what);
    }
    // Every operation documented with a body is among them (and some that take none, such as
    // DELETE and decline, whose body is still read), but the signed and messaging ones.
    const withBody = operationsOf(spec)
      .filter(
        ([, , operation]) =>
          operation.requestBody && !schemesOf(operation).some((scheme) => scheme === 'signedRequest' || scheme === 'apiKey'),
      )
      .map(([method, template]) => `${method} ${template}`);
    assert.deepEqual(
      withBody.filter((what) => !checked.includes(what)),
      [],
    );
    assert.ok(checked.length >= 14, checked.join(', '));
    // The session is still good: no refused body reached logout.
    assert.equal((await call(lipa.url, 'GET', '/api/v1/me', { token: merchant })).status, 200);
  });

  test('from /openapi.json: a body it calls required may not be left out (422 invalid_json), one it calls optional may', async (t) => {
    const spec = (await call(lipa.url, 'GET', '/openapi.json')).body as OpenApiDocument;
    const { sessionFor } = await sessions();
    const optional: string[] = [];
    for (const [method, template, operation] of operationsOf(spec)) {
      const body = operation.requestBody as { required?: boolean } | undefined;
      // The signed and messaging endpoints answer in their own ways (403 first; the messaging 400).
      if (!body || schemesOf(operation).some((scheme) => scheme === 'signedRequest' || scheme === 'apiKey')) continue;
      const what = `${method} ${template}`;
      await t.test(what, async () => {
        const path = template.replace('{phone}', '254700000000').replace(/\{[^}]+\}/g, 'x');
        const reply = await call(lipa.url, method.toUpperCase(), path, { token: sessionFor(operation, template) });
        if (body.required === false) {
          assert.equal(reply.status, 201, reply.text);
          optional.push(what);
        } else assertError(reply, 422, 'invalid_json');
      });
    }
    assert.deepEqual(optional.sort(), ['post /api/v1/api-keys', 'post /api/v1/messaging-keys']);
  });
});
