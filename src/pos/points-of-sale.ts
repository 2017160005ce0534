import { randomUUID } from 'node:crypto';
import addFormats from 'ajv-formats';
import type { Static } from 'typebox';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/database.js';
import type { PointOfSaleTable } from '../db/schema.js';
import { AppError, assertText, FieldChecks, validationError } from '../http/errors.js';
import { isoTime } from '../http/time.js';
import { assertNotSuspended } from '../merchants/suspension.js';
import type { PosBody } from './schemas.js';

/**
 * The most points of sale a merchant may register. Their list has no paging (CONTRACT §4: it
 * lists the merchant's own), so this bounds its answer: ~500 KiB for usual fields, a few MiB
 * with every URL at its 2,048 characters. A chain with more tills than this registers its
 * branches as merchants of their own.
 */
export const MAX_POINTS_OF_SALE = 1000;

export function toPointOfSale(row: PointOfSaleTable) {
  return {
    posId: row.id,
    terminalId: row.terminal_id,
    merchantId: row.merchant_id,
    categoryId: row.category_id,
    posCompanyName: row.pos_company_name,
    description: row.description,
    website: row.website,
    resultUrl: row.result_url,
    serverUrl: row.server_url,
    trustAllCertificates: row.trust_all_certificates === 1,
    createdAt: isoTime(row.created_at),
  };
}

// JSON Schema's `uri` format as ajv checks it (its "full" mode, Fastify's default). The
// package is CommonJS: its plugin, with `get`, is the module's `default`.
const uriFormat = addFormats.default.get('uri', 'full');
if (typeof uriFormat !== 'function') throw new Error("ajv-formats' uri format is no longer a function");
const isUri: (value: string) => boolean = uriFormat;

/** An absolute http(s) URL with a host; production accepts https only for callback targets. */
export function assertHttpUrl(ctx: AppContext, field: string, value: string, callbackTarget: boolean): void {
  // RFC 3986's syntax first (what JSON Schema's `uri` format checks): WHATWG URL parsing
  // would take and quietly encode spaces, quotes or brackets.
  if (!isUri(value)) throw validationError(field, 'must be an absolute http(s) URL');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw validationError(field, 'must be an absolute http(s) URL');
  }
  // The host right after `//`: `http:shop.example`, `http:/shop.example`, `http:///cb` and
  // `http://\cb` parse, with a host the text does not show as one.
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.hostname === '' || !/^https?:\/\/[^/\\]/i.test(value)) {
    throw validationError(field, 'must be an absolute http(s) URL');
  }
  // Nothing listens on port 0: a callback there would go to the scheme's own port instead.
  if (url.port === '0') throw validationError(field, 'must not use port 0');
  if (callbackTarget && ctx.config.env === 'production' && url.protocol !== 'https:') {
    throw validationError(field, 'must be an https URL in production');
  }
  if (url.username || url.password) throw validationError(field, 'must not contain credentials');
}

/** Registers a point of sale for the calling merchant (CONTRACT §4). */
export async function createPointOfSale(ctx: AppContext, merchantId: string, body: Static<typeof PosBody>) {
  if (body.merchantId.toLowerCase() !== merchantId) {
    throw new AppError('forbidden', 'merchantId must be your own merchant id.');
  }
  const category = await ctx.store.db
    .selectFrom('categories')
    .select('id')
    .where('id', '=', body.categoryId.toLowerCase())
    .executeTakeFirst();
  // Every field at fault in one refusal, in the body's order, as for a payment.
  const checks = new FieldChecks();
  checks.run(() => {
    if (!category) throw validationError('categoryId', 'is not a known category (see GET /api/v1/categories)');
  });
  checks.run(() => assertText('posCompanyName', body.posCompanyName, 'name'));
  checks.run(() => assertText('description', body.description, 'text'));
  checks.run(() => assertHttpUrl(ctx, 'website', body.website, false));
  checks.run(() => assertHttpUrl(ctx, 'resultUrl', body.resultUrl, true));
  checks.run(() => assertHttpUrl(ctx, 'serverUrl', body.serverUrl, false));
  checks.done();
  // done() has thrown unless every rule passed: the category is known.
  const categoryId = (category as { id: string }).id;

  const row: PointOfSaleTable = {
    id: randomUUID(),
    merchant_id: merchantId,
    terminal_id: body.terminalId,
    category_id: categoryId,
    pos_company_name: body.posCompanyName,
    description: body.description,
    website: body.website,
    result_url: body.resultUrl,
    server_url: body.serverUrl,
    trust_all_certificates: body.trustAllCertificates ? 1 : 0,
    created_at: ctx.now(),
  };
  try {
    await ctx.store.write(async (tx) => {
      // The merchant's row is locked first on PostgreSQL, so concurrent creations count one
      // after another, and a suspension committing meanwhile is seen.
      await assertNotSuspended(ctx, tx, merchantId);
      const { n } = await tx
        .selectFrom('points_of_sale')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('merchant_id', '=', merchantId)
        .executeTakeFirstOrThrow();
      if (Number(n) >= MAX_POINTS_OF_SALE) {
        throw new AppError(
          'too_many_points_of_sale',
          `You already have ${MAX_POINTS_OF_SALE} points of sale, the most allowed; register further branches as merchants of their own.`,
        );
      }
      await tx.insertInto('points_of_sale').values(row).execute();
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('terminal_id_taken', `Terminal ${body.terminalId} is already registered.`);
    throw error;
  }
  return toPointOfSale(row);
}

export async function listPointsOfSale(ctx: AppContext, merchantId: string) {
  const rows = await ctx.store.db
    .selectFrom('points_of_sale')
    .selectAll()
    .where('merchant_id', '=', merchantId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map(toPointOfSale);
}
