import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { requireAdmin } from '../http/bearer.js';
import { LimitParam, limitOf } from '../http/pagination.js';
import { adminAuth, errors } from '../http/schemas.js';
import { isoTime } from '../http/time.js';
import type { App } from '../http/types.js';
import { CURRENCY, fromMinorUnits } from '../ledger/money.js';
import { createMerchant } from '../merchants/create-merchant.js';
import { hideCodes } from '../messaging/messenger.js';
import { createPayer, deposit } from '../payers/payers.js';
import {
  CreateMerchantBody,
  CreatePayerBody,
  DepositBody,
  DepositParams,
  DepositResponse,
  MerchantListed,
  MerchantResponse,
  OutboxMessage,
  OutboxQuery,
  PayerListed,
  PayerResponse,
} from './schemas.js';

/** The operator API (CONTRACT §2), behind the ADMIN_TOKEN bearer. */
export function registerAdminRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireAdmin(ctx) };
  const tags = ['Operator'];

  app.post(
    '/api/v1/admin/merchants',
    {
      ...common,
      schema: { tags, security: adminAuth, body: CreateMerchantBody, response: { 201: MerchantResponse, ...errors(401, 409, 422, 429) } },
    },
    async (request, reply) => reply.code(201).send(await createMerchant(ctx, request.body)),
  );

  app.get(
    '/api/v1/admin/merchants',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: 'Merchants, newest first',
        querystring: Type.Object({ limit: LimitParam }),
        response: { 200: Type.Array(MerchantListed), ...errors(401, 422, 429) },
      },
    },
    async (request) => {
      const rows = await ctx.store.db
        .selectFrom('merchants')
        .select(['id', 'login', 'name', 'created_at'])
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limitOf(request.query.limit))
        .execute();
      return rows.map((m) => ({ merchantId: m.id, login: m.login, name: m.name, createdAt: isoTime(m.created_at) }));
    },
  );

  app.post(
    '/api/v1/admin/payers',
    {
      ...common,
      schema: { tags, security: adminAuth, body: CreatePayerBody, response: { 201: PayerResponse, ...errors(401, 409, 422, 429) } },
    },
    async (request, reply) => reply.code(201).send(await createPayer(ctx, request.body)),
  );

  app.get(
    '/api/v1/admin/payers',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: 'Payers with their wallet balance, newest first',
        querystring: Type.Object({ limit: LimitParam }),
        response: { 200: Type.Array(PayerListed), ...errors(401, 422, 429) },
      },
    },
    async (request) => {
      const rows = await ctx.store.db
        .selectFrom('payers as p')
        .leftJoin('ledger_accounts as a', (join) =>
          join.onRef('a.owner_id', '=', 'p.id').on('a.kind', '=', 'wallet').on('a.currency', '=', CURRENCY),
        )
        .select(['p.id', 'p.phone', 'p.name', 'p.created_at', 'a.balance'])
        .orderBy('p.created_at', 'desc')
        .orderBy('p.id', 'desc')
        .limit(limitOf(request.query.limit))
        .execute();
      return rows.map((p) => ({
        payerId: p.id,
        phone: p.phone,
        name: p.name,
        balance: fromMinorUnits(Number(p.balance ?? 0)),
        currency: CURRENCY,
        createdAt: isoTime(p.created_at),
      }));
    },
  );

  app.post(
    '/api/v1/admin/payers/:phone/deposits',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        params: DepositParams,
        body: DepositBody,
        response: { 200: DepositResponse, ...errors(401, 404, 409, 422, 429) },
      },
    },
    async (request) => deposit(ctx, request.params.phone, request.body.amount),
  );

  app.get(
    '/api/v1/admin/outbox',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: 'Messages the service sent (embedded outbox), newest first',
        querystring: OutboxQuery,
        response: { 200: Type.Array(OutboxMessage), ...errors(401, 422, 429) },
      },
    },
    async (request) => {
      const limit = limitOf(request.query.limit);
      const rows = await ctx.store.db
        .selectFrom('messages')
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit)
        .execute();
      return rows.map((m) => ({
        id: m.id,
        type: m.type,
        purpose: m.purpose,
        to: m.type === 'email' ? (m.email ?? '') : `${m.phone_country_code ?? ''}${m.phone_number ?? ''}`,
        subject: m.subject,
        contentType: m.content_type,
        // Staging testers read login codes here; in production no operator may read one.
        content: m.purpose === 'otp' && ctx.config.env === 'production' ? hideCodes(m.content) : m.content,
        status: m.status,
        createdAt: isoTime(m.created_at),
      }));
    },
  );
}
