import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/**
 * Every answer a test gets through `call()` is checked against the service's own
 * /openapi.json: its status must be documented for the operation, and a JSON body must
 * match the schema documented for that status (with no member the schema does not name).
 * So the OpenAPI description cannot drift from what the service does.
 */

interface Operation {
  pattern: RegExp;
  method: string;
  template: string;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

interface Checker {
  operations: Operation[];
  ajv: Ajv;
  compiled: Map<string, ValidateFunction>;
  spec: { components?: unknown };
}

const checkers = new Map<string, Promise<Checker | null>>();

async function checkerFor(base: string): Promise<Checker | null> {
  let checker = checkers.get(base);
  if (!checker) {
    checker = load(base);
    checkers.set(base, checker);
  }
  return checker;
}

async function load(base: string): Promise<Checker | null> {
  let spec: { paths: Record<string, Record<string, { responses: Operation['responses'] }>>; components?: unknown };
  try {
    const response = await fetch(`${base}/openapi.json`);
    if (response.status !== 200) return null;
    spec = (await response.json()) as typeof spec;
  } catch {
    return null;
  }
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
  addFormats.default(ajv);
  ajv.addSchema(rebase({ components: spec.components ?? {} }) as object, 'spec.json');
  const operations: Operation[] = [];
  for (const [template, methods] of Object.entries(spec.paths)) {
    const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
    for (const [method, operation] of Object.entries(methods))
      operations.push({ pattern, method: method.toUpperCase(), template, responses: operation.responses });
  }
  // Fixed paths before templated ones (/x/status before /x/{id}).
  operations.sort((a, b) => Number(a.template.includes('{')) - Number(b.template.includes('{')));
  return { operations, ajv, compiled: new Map(), spec };
}

/** Local references point into the document added as spec.json. */
function rebase(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rebase);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `spec.json${v}` : rebase(v);
    return out;
  }
  return value;
}

/** Members of `body` that the schema does not name, where it does not allow others. */
function undocumented(schema: unknown, body: unknown, root: Checker, at: string, out: string[]): void {
  const s = resolve(schema, root);
  if (!s || typeof s !== 'object' || body === null || typeof body !== 'object') return;
  const o = s as Record<string, unknown>;
  for (const k of ['anyOf', 'oneOf', 'allOf'] as const) {
    const list = o[k] as unknown[] | undefined;
    if (list) {
      // Judge by the first alternative the body matches.
      const match = k === 'allOf' ? list : list.filter((alt) => validatorOf(alt, root)(body)).slice(0, 1);
      for (const alt of match) undocumented(alt, body, root, at, out);
      return;
    }
  }
  if (Array.isArray(body)) {
    body.forEach((item, i) => {
      undocumented(o.items, item, root, `${at}[${i}]`, out);
    });
    return;
  }
  const props = (o.properties ?? {}) as Record<string, unknown>;
  for (const [key, value] of Object.entries(body)) {
    if (key in props) undocumented(props[key], value, root, `${at}.${key}`, out);
    else if (o.additionalProperties === undefined && o.properties) out.push(`${at}.${key}`);
    else if (o.additionalProperties && typeof o.additionalProperties === 'object')
      undocumented(o.additionalProperties, value, root, `${at}.${key}`, out);
  }
}

const alternatives = new WeakMap<object, ValidateFunction>();

/** One compiled validator per alternative of an anyOf or oneOf. */
function validatorOf(alternative: unknown, root: Checker): ValidateFunction {
  const key = alternative as object;
  let validate = alternatives.get(key);
  if (!validate) {
    validate = root.ajv.compile(rebase(resolve(alternative, root)) as object);
    alternatives.set(key, validate);
  }
  return validate;
}

function resolve(schema: unknown, root: Checker): unknown {
  let s = schema as Record<string, unknown> | undefined;
  while (s && typeof s.$ref === 'string') {
    const path = (s.$ref as string).replace(/^(spec\.json)?#\//, '').split('/');
    let cur: unknown = root.spec;
    for (const part of path) cur = (cur as Record<string, unknown>)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    s = cur as Record<string, unknown> | undefined;
  }
  return s;
}

/** Checks one answer; throws when it is not as /openapi.json documents it. */
export async function checkAgainstOpenApi(
  base: string,
  method: string,
  path: string,
  status: number,
  contentType: string | null,
  body: unknown,
): Promise<void> {
  const pathname = path.split('?')[0] ?? path;
  if (pathname === '/openapi.json' || pathname.startsWith('/docs')) return;
  const checker = await checkerFor(base);
  if (!checker) return;
  const operation = checker.operations.find((op) => op.method === method.toUpperCase() && op.pattern.test(pathname));
  const problems: string[] = [];
  const type = (contentType ?? '').split(';')[0]?.trim() ?? '';
  if (!operation) {
    // The web pages and their scripts are not API operations; unknown paths answer 404.
    if (type === 'application/json' && status !== 404 && status !== 405) problems.push('no such operation documented');
  } else {
    const documented = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`] ?? operation.responses.default;
    if (!documented) problems.push(`status ${status} not documented (has ${Object.keys(operation.responses).join(', ')})`);
    else {
      const content = documented.content;
      if (type && status !== 204 && body !== null && !content) problems.push(`a ${type} body where none is documented`);
      else if (content && type && !Object.keys(content).some((k) => k.split(';')[0]?.trim() === type || k === '*/*'))
        problems.push(`content type ${type} not documented (has ${Object.keys(content).join(', ')})`);
      else if (content && type === 'application/json') {
        const schema = content['application/json']?.schema;
        if (schema) {
          const key = `${operation.method} ${operation.template} ${status}`;
          let validate = checker.compiled.get(key);
          if (!validate) {
            validate = checker.ajv.compile(rebase(schema) as object);
            checker.compiled.set(key, validate);
          }
          if (!validate(body)) problems.push(`body does not match: ${checker.ajv.errorsText(validate.errors, { dataVar: 'body' })}`);
          const extra: string[] = [];
          undocumented(schema, body, checker, 'body', extra);
          if (extra.length > 0)
            problems.push(`undocumented members: ${[...new Set(extra.map((e) => e.replace(/\[\d+\]/g, '[]')))].join(', ')}`);
        }
      }
    }
  }
  if (problems.length === 0) return;
  const line = `${method.toUpperCase()} ${operation?.template ?? pathname} ${status}: ${problems.join('; ')}`;
  throw new Error(`The answer does not match /openapi.json: ${line}; body ${JSON.stringify(body)?.slice(0, 300)}`);
}

/** fetch that checks the answer as `call()` does: for the LipaClient under test. */
export const checkedFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  const url = new URL(input instanceof Request ? input.url : String(input));
  const text = await response.clone().text();
  let parsed: unknown = text;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  await checkAgainstOpenApi(
    url.origin,
    init?.method ?? 'GET',
    `${url.pathname}${url.search}`,
    response.status,
    response.headers.get('content-type'),
    parsed,
  );
  return response;
};
