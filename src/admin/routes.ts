import type { AppContext } from '../context.js';
import { requireAdmin } from '../http/bearer.js';
import { PageOf } from '../http/pagination.js';
import { adminAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { createMerchant } from '../merchants/create-merchant.js';
import { listMerchants } from '../merchants/list-merchants.js';
import { reinstateMerchant, suspendMerchant } from '../merchants/suspension.js';
import { listOutbox } from '../messaging/outbox.js';
import { createPayer, deposit, listPayers } from '../payers/payers.js';
import { createSettlement } from '../settlements/create-settlement.js';
import {
  CreateMerchantBody,
  CreatePayerBody,
  DepositBody,
  DepositParams,
  DepositResponse,
  ListQuery,
  MerchantListed,
  MerchantParams,
  MerchantResponse,
  MerchantStanding,
  OutboxMessage,
  PayerListed,
  PayerResponse,
  SettlementBody,
  SettlementResponse,
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
        querystring: ListQuery,
        response: { 200: PageOf(MerchantListed), ...errors(401, 422, 429) },
      },
    },
    async (request) => listMerchants(ctx, request.query),
  );

  app.post(
    '/api/v1/admin/merchants/:merchantId/settlements',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: "Pay out a merchant's balance to its bank",
        description: 'Debits the merchant and credits the settlement clearing account; more than the balance is 409 insufficient_balance.',
        params: MerchantParams,
        body: SettlementBody,
        response: { 200: SettlementResponse, 201: SettlementResponse, ...errors(401, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => {
      const { settlement, created } = await createSettlement(ctx, request.params.merchantId, request.body);
      return reply.code(created ? 201 : 200).send(settlement);
    },
  );

  app.post(
    '/api/v1/admin/merchants/:merchantId/suspend',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: 'Suspend a merchant: its keys revoked, its sessions ended, its sign-ins refused (403 account_suspended)',
        params: MerchantParams,
        response: { 200: MerchantStanding, ...errors(401, 404, 429) },
      },
    },
    async (request) => suspendMerchant(ctx, request.params.merchantId),
  );

  app.post(
    '/api/v1/admin/merchants/:merchantId/reinstate',
    {
      ...common,
      schema: {
        tags,
        security: adminAuth,
        summary: 'Lift a suspension: the merchant may sign in again (and makes new keys)',
        params: MerchantParams,
        response: { 200: MerchantStanding, ...errors(401, 404, 429) },
      },
    },
    async (request) => reinstateMerchant(ctx, request.params.merchantId),
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
        querystring: ListQuery,
        response: { 200: PageOf(PayerListed), ...errors(401, 422, 429) },
      },
    },
    async (request) => listPayers(ctx, request.query),
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
        querystring: ListQuery,
        response: { 200: PageOf(OutboxMessage), ...errors(401, 422, 429) },
      },
    },
    async (request) => listOutbox(ctx, request.query),
  );
}
