import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/**
 * Every answer a test gets through `call()` (and through a LipaClient built with
 * `fetch: checkedFetch`) is checked against the service's own OpenAPI document: its status
 * must be documented for the operation, and a JSON body must match the schema documented
 * for that status, with no member the schema does not name. So the OpenAPI description
 * cannot drift from what the service does.
 *
 * `startLipa()` registers each listener's document (the mock listener's holds only the two
 * operations it serves) and forgets it when the listener closes. A service started some other
 * way (a child process) is checked against its GET /openapi.json, fetched on first use; if
 * that cannot be fetched (the service is stopping), the answer is not checked.
 */

type Responses = Record<string, { content?: Record<string, { schema?: unknown }> }>;

export interface OpenApiDocument {
  paths: Record<string, Record<string, unknown>>;
  components?: unknown;
}

interface Operation {
  pattern: RegExp;
  method: string;
  template: string;
  responses: Responses;
}

interface Checker {
  operations: Operation[];
  ajv: Ajv;
  document: OpenApiDocument;
  /** Per operation and status, and per anyOf/oneOf alternative: compiled once. */
  compiled: Map<string, ValidateFunction>;
  alternatives: WeakMap<object, ValidateFunction>;
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace']);

/** The operations of an OpenAPI document as [method, path template, operation]. */
export function operationsOf(document: OpenApiDocument): Array<[string, string, Record<string, unknown>]> {
  return Object.entries(document.paths).flatMap(([template, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.has(method))
      .map(([method, operation]): [string, string, Record<string, unknown>] => [method, template, operation as Record<string, unknown>]),
  );
}

/** The security schemes an operation takes (bearerAuth, adminToken, apiKey, signedRequest). */
export function schemesOf(operation: Record<string, unknown>): string[] {
  return ((operation.security ?? []) as Array<Record<string, unknown>>).flatMap((scheme) => Object.keys(scheme));
}

/** Of the operations behind a session, the payer's (the wallet); the rest are the merchant's. */
export const isPayerOperation = (template: string): boolean => template.startsWith('/api/v1/wallet');

const checkers = new Map<string, Checker>();

/** Checks answers from `base` against `document` (a copy is kept). */
export function registerOpenApi(base: string, document: OpenApiDocument): void {
  checkers.set(base, checkerOf(JSON.parse(JSON.stringify(document)) as OpenApiDocument));
}

/** The listener at `base` is gone: a later one on the same port is not judged by its document. */
export function forgetOpenApi(base: string): void {
  checkers.delete(base);
}

/**
 * The checker of the service at `base`: the document its harness registered, or the one it
 * serves. Null only when the service is going away (stopping: 503, or the connection refused)
 * and has no document to judge by; a service that answers without one fails the test.
 */
async function checkerFor(base: string): Promise<Checker | null> {
  const known = checkers.get(base);
  if (known) return known;
  let response: Response;
  try {
    response = await fetch(`${base}/openapi.json`);
  } catch {
    return null;
  }
  if (response.status === 503) return null;
  if (response.status !== 200) throw new Error(`${base}/openapi.json answered ${response.status}: no document to check the answer against`);
  const checker = checkerOf((await response.json()) as OpenApiDocument);
  checkers.set(base, checker);
  return checker;
}

function checkerOf(document: OpenApiDocument): Checker {
  // strict: false lets OpenAPI's own keywords (example, discriminator…) through; nullable is Ajv's.
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(rebase({ components: document.components ?? {} }) as object, 'spec.json');
  const operations = operationsOf(document).map(([method, template, operation]) => ({
    pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    method: method.toUpperCase(),
    template,
    responses: operation.responses as Responses,
  }));
  // Fixed paths before templated ones (/x/status before /x/{id}).
  operations.sort((a, b) => Number(a.template.includes('{')) - Number(b.template.includes('{')));
  return { operations, ajv, document, compiled: new Map(), alternatives: new WeakMap() };
}

/** Local references point into the document added as spec.json. */
function rebase(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rebase);
  if (value && typeof value === 'object') {
    const copy: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value))
      copy[key] = key === '$ref' && typeof member === 'string' && member.startsWith('#/') ? `spec.json${member}` : rebase(member);
    return copy;
  }
  return value;
}

type Schema = Record<string, unknown>;

function resolve(schema: unknown, checker: Checker): Schema | undefined {
  let current = schema as Schema | undefined;
  while (current && typeof current.$ref === 'string') {
    let target: unknown = checker.document;
    for (const part of current.$ref.replace(/^(spec\.json)?#\//, '').split('/'))
      target = (target as Schema | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    current = target as Schema | undefined;
  }
  return current;
}

function validatorOf(schema: unknown, checker: Checker): ValidateFunction {
  const key = schema as object;
  let validate = checker.alternatives.get(key);
  if (!validate) {
    validate = checker.ajv.compile(rebase(resolve(schema, checker)) as object);
    checker.alternatives.set(key, validate);
  }
  return validate;
}

/**
 * The members of `body` that `schema` does not name, where it does not allow others. allOf
 * names what any of its branches names; of anyOf/oneOf, the alternative the body matches
 * with the fewest such members judges it.
 */
function undocumented(schema: unknown, body: unknown, checker: Checker, at: string): string[] {
  const resolved = resolve(schema, checker);
  if (!resolved || body === null || typeof body !== 'object') return [];
  const { anyOf, oneOf, allOf, ...rest } = resolved as Schema & { anyOf?: unknown[]; oneOf?: unknown[]; allOf?: unknown[] };
  if (allOf) {
    const branches = allOf.map((branch) => resolve(branch, checker) ?? {});
    const merged: Schema = { ...rest, properties: Object.assign({}, rest.properties, ...branches.map((b) => b.properties ?? {})) };
    if (branches.some((b) => b.additionalProperties !== undefined)) merged.additionalProperties = true;
    return undocumented(merged, body, checker, at);
  }
  const alternatives = anyOf ?? oneOf;
  if (alternatives) {
    const judged = alternatives
      .filter((alternative) => validatorOf(alternative, checker)(body))
      .map((alternative) => {
        const chosen = resolve(alternative, checker) ?? {};
        const properties = { ...(rest.properties as Schema | undefined), ...(chosen.properties as Schema | undefined) };
        return undocumented({ ...chosen, ...(Object.keys(properties).length > 0 ? { properties } : {}) }, body, checker, at);
      })
      .sort((a, b) => a.length - b.length);
    return judged[0] ?? [];
  }
  if (Array.isArray(body)) return body.flatMap((item) => undocumented(resolved.items, item, checker, `${at}[]`));
  const properties = (resolved.properties ?? {}) as Schema;
  const extra: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    if (key in properties) extra.push(...undocumented(properties[key], value, checker, `${at}.${key}`));
    else if (resolved.additionalProperties && typeof resolved.additionalProperties === 'object')
      extra.push(...undocumented(resolved.additionalProperties, value, checker, `${at}.${key}`));
    else if (resolved.additionalProperties === undefined && resolved.properties) extra.push(`${at}.${key}`);
  }
  return extra;
}

const mediaType = (type: string) => type.split(';')[0]?.trim().toLowerCase() ?? '';

/** Checks one answer; throws when it is not as the OpenAPI document says. */
export async function checkAgainstOpenApi(
  base: string,
  method: string,
  path: string,
  status: number,
  contentType: string | null,
  body: unknown,
): Promise<void> {
  // As fetch sends it: dot segments resolved, no query.
  const pathname = new URL(path, base).pathname;
  if (pathname === '/openapi.json' || pathname.startsWith('/docs')) return;
  const checker = await checkerFor(base);
  if (!checker) return;
  // HEAD is answered for every GET, without a body.
  const head = method.toUpperCase() === 'HEAD';
  const wanted = head ? 'GET' : method.toUpperCase();
  const operation = checker.operations.find((op) => op.method === wanted && op.pattern.test(pathname));
  const type = mediaType(contentType ?? '');
  const problems: string[] = [];
  // Every API operation lists 500 (a failure of ours can answer any), but no test expects one
  // outside the messaging API, whose tests make it on purpose: elsewhere it is a bug.
  if (status === 500 && !pathname.startsWith('/api/messages')) problems.push('an internal error (500), which no test expects');
  if (!operation) {
    // The web pages and their scripts are not API operations; unknown paths answer 404.
    if (type === 'application/json' && status !== 404 && status !== 405) problems.push('no such operation documented');
  } else {
    const documented = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`] ?? operation.responses.default;
    const content = documented?.content;
    const media = content && Object.keys(content).find((key) => key === '*/*' || mediaType(key) === type);
    if (!documented) problems.push(`status ${status} not documented (has ${Object.keys(operation.responses).join(', ')})`);
    else if (head || status === 204) {
      // no body to compare
    } else if (body === null) {
      if (content) problems.push(`no body where ${Object.keys(content).join(', ')} is documented`);
    } else if (!content) problems.push(`a ${type || 'untyped'} body where none is documented`);
    else if (!media) problems.push(`content type ${type || '(none)'} not documented (has ${Object.keys(content).join(', ')})`);
    else if (type === 'application/json') {
      const schema = content[media]?.schema;
      if (schema) {
        const key = `${operation.method} ${operation.template} ${status}`;
        let validate = checker.compiled.get(key);
        if (!validate) {
          validate = checker.ajv.compile(rebase(schema) as object);
          checker.compiled.set(key, validate);
        }
        if (!validate(body)) problems.push(`body does not match: ${checker.ajv.errorsText(validate.errors, { dataVar: 'body' })}`);
        const extra = [...new Set(undocumented(schema, body, checker, 'body'))];
        if (extra.length > 0) problems.push(`undocumented members: ${extra.join(', ')}`);
      }
    }
  }
  if (problems.length === 0) return;
  const line = `${method.toUpperCase()} ${operation?.template ?? pathname} ${status}: ${problems.join('; ')}`;
  throw new Error(`The answer does not match /openapi.json: ${line}; body ${JSON.stringify(body)?.slice(0, 300)}`);
}

/** An answer's text as JSON when it is JSON, else the text itself (null when empty). */
export function parseAnswer(text: string): unknown {
  try {
    return text === '' ? null : JSON.parse(text);
  } catch {
    return text;
  }
}

/** fetch that checks the answer as `call()` does: for the LipaClient under test. */
export const checkedFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  const url = new URL(input instanceof Request ? input.url : String(input));
  const body = parseAnswer(await response.clone().text());
  await checkAgainstOpenApi(
    url.origin,
    init?.method ?? 'GET',
    `${url.pathname}${url.search}`,
    response.status,
    response.headers.get('content-type'),
    body,
  );
  return response;
};
