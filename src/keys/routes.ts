import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { createApiKey, createMessagingKey, listApiKeys, listMessagingKeys, revokeApiKey, revokeMessagingKey } from './keys.js';
import { ApiKeyCreated, ApiKeyListed, IdParams, KeyIdParams, MessagingKeyCreated, MessagingKeyListed, OptionalKeyName } from './schemas.js';

/** Signing keys and messaging keys of the calling merchant (CONTRACT §4). */
export function registerKeyRoutes(app: App, ctx: AppContext): void {
  const common = { onRequest: requireSession(ctx, 'merchant') };
  const tags = ['Keys'];
  const security = bearerAuth;

  app.post(
    '/api/v1/api-keys',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Create a signing key (secret shown once)',
        body: Type.Optional(OptionalKeyName),
        response: { 201: ApiKeyCreated, ...errors(401, 403, 409, 422) },
      },
    },
    async (request, reply) => reply.code(201).send(await createApiKey(ctx, principalOf(request).id, request.body?.name ?? null)),
  );
  app.get(
    '/api/v1/api-keys',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'List signing keys (no secrets)',
        response: { 200: Type.Array(ApiKeyListed), ...errors(401, 403) },
      },
    },
    async (request) => listApiKeys(ctx, principalOf(request).id),
  );
  app.delete(
    '/api/v1/api-keys/:keyId',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Revoke a signing key',
        params: KeyIdParams,
        response: { 204: Type.Null(), ...errors(401, 403, 404) },
      },
    },
    async (request, reply) => {
      await revokeApiKey(ctx, principalOf(request).id, request.params.keyId);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/v1/messaging-keys',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Create a messaging API key (shown once)',
        body: Type.Optional(OptionalKeyName),
        response: { 201: MessagingKeyCreated, ...errors(401, 403, 409, 422) },
      },
    },
    async (request, reply) => reply.code(201).send(await createMessagingKey(ctx, principalOf(request).id, request.body?.name ?? null)),
  );
  app.get(
    '/api/v1/messaging-keys',
    {
      ...common,
      schema: { tags, security, summary: 'List messaging keys', response: { 200: Type.Array(MessagingKeyListed), ...errors(401, 403) } },
    },
    async (request) => listMessagingKeys(ctx, principalOf(request).id),
  );
  app.delete(
    '/api/v1/messaging-keys/:id',
    {
      ...common,
      schema: {
        tags,
        security,
        summary: 'Revoke a messaging key',
        params: IdParams,
        response: { 204: Type.Null(), ...errors(401, 403, 404) },
      },
    },
    async (request, reply) => {
      await revokeMessagingKey(ctx, principalOf(request).id, request.params.id);
      return reply.code(204).send(null);
    },
  );
}
