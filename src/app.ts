import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { registerAdminRoutes } from './admin/routes.js';
import { registerMeRoutes } from './auth/me.js';
import { registerAuthRoutes } from './auth/routes.js';
import { registerCallbackRoutes } from './callbacks/routes.js';
import { registerCategoryRoutes } from './categories/routes.js';
import type { AppContext } from './context.js';
import { errors } from './http/schemas.js';
import { createServer } from './http/server.js';
import type { App } from './http/types.js';
import { registerKeyRoutes } from './keys/routes.js';
import { registerMerchantMessageRoutes } from './messaging/merchant-routes.js';
import { messagingKeyOf, registerMessagingRoutes } from './messaging/routes.js';
import { countRequests } from './ops/metrics.js';
import { registerOpsRoutes } from './ops/routes.js';
import { registerDashboardPaymentActions } from './payments/dashboard-actions.js';
import { registerMerchantPaymentRoutes } from './payments/merchant-routes.js';
import { registerPaymentRoutes } from './payments/routes.js';
import { registerPosRoutes } from './pos/routes.js';
import { registerMerchantRefundRoutes } from './refunds/merchant-routes.js';
import { registerRefundRoutes } from './refunds/routes.js';
import { registerTransactionRoutes } from './transactions/routes.js';
import { registerWalletRoutes } from './wallet/routes.js';
import { registerAdminPage } from './web/admin.js';
import { registerDashboardPage } from './web/dashboard.js';
import { registerPayPages } from './web/pay.js';
import { registerWebRoutes } from './web/routes.js';
import { registerWalletPage } from './web/wallet.js';

export const API_VERSION = '1.0.0';

/** The main listener: every endpoint, the operator API, docs and health. */
/** The methods whose requests Fastify reads a body for. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

interface OptionalBody {
  required?: boolean;
  content?: Record<string, { schema?: { nullable?: boolean } }>;
}

export async function buildApp(ctx: AppContext): Promise<App> {
  const app = createServer(ctx.log, {
    messagingKeyValid: async (request) => (await messagingKeyOf(ctx, request)) !== null,
    strictTransport: ctx.config.env === 'production',
    trustProxy: ctx.config.trustProxy,
  });
  await app.register(swagger, {
    transform: ({ schema, url, route }) => {
      // Routes that describe their answers without a response schema (the messaging API).
      const docs = route.config?.responseDocs;
      if (docs) return { schema: { ...schema, response: docs }, url };
      // The answers any request body can get from the framework, even on a route that takes
      // none: too large, not JSON (the signed endpoints answer that with 422 after the
      // signature), or JSON that does not parse or reads two ways. And 503: on every route
      // while the instance stops, and on every API route database_unavailable; and 500, a
      // failure of ours (the interface lists it for every payment and authentication endpoint).
      if (!schema) return { schema, url };
      const described = route.config?.bodyDocs ? { ...schema, body: route.config.bodyDocs } : schema;
      const takesBody = [route.method].flat().some((m) => BODY_METHODS.has(m));
      const body = !takesBody ? {} : route.config?.signed ? errors(413, 422) : errors(413, 415, 422);
      // A NUL (%00) in any query value of an API route (the signed ones read no query).
      const query = url.startsWith('/api/') && !route.config?.signed ? errors(422) : {};
      const ours = errors(500, 503);
      return { schema: { ...described, response: { ...ours, ...query, ...body, ...(schema.response as object) } }, url };
    },
    // @fastify/swagger marks every body required; a body that may be null may also be left out.
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      for (const operations of Object.values(document.openapiObject.paths ?? {}))
        for (const operation of Object.values(operations as Record<string, { requestBody?: OptionalBody }>))
          if (operation.requestBody?.content?.['application/json']?.schema?.nullable === true) operation.requestBody.required = false;
      return document.openapiObject;
    },
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Lipa: merchant payments and messaging',
        version: API_VERSION,
        description:
          'Person-to-merchant mobile-money payments, with email and SMS messaging. See docs/api.md. ' +
          'This describes the main listener; the mock environment (MOCK_PORT, staging only) answers ' +
          'POST /api/v1/authorization and POST /api/v1/authorization/confirm exactly as here (endpoint 3). ' +
          'The pages (/pay/{paymentIdentifier}, /wallet, /dashboard, /admin) are HTML and not described.',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'Token from POST /api/v1/authorization/confirm' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The operator ADMIN_TOKEN' },
          apiKey: { type: 'apiKey', in: 'header', name: 'api_key', description: 'A messaging key from POST /api/v1/messaging-keys' },
          signedRequest: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Service-Signature',
            description: 'HMAC-SHA256 request signing with the five X-Service-* headers; see docs/signing.md',
          },
        },
      },
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The pages' protections for the API explorer too: its own script hashes, never in a frame.
    staticCSP: true,
    transformStaticCSP: (header: string) =>
      header
        .replace("frame-ancestors 'self'", "frame-ancestors 'none'")
        .replace(/\s*upgrade-insecure-requests;?/, '')
        // Swagger UI sets a few inline styles as it renders; no script may be inline.
        .replace("style-src 'self' https:", "style-src 'self' 'unsafe-inline'")
        .trim(),
    uiHooks: {
      onRequest: (_request, reply, done) => {
        reply.header('x-frame-options', 'DENY');
        done();
      },
    },
  });

  registerOpsRoutes(app, ctx);
  registerAuthRoutes(app, ctx, 'main');
  registerMeRoutes(app, ctx);
  registerCategoryRoutes(app, ctx);
  registerKeyRoutes(app, ctx);
  registerPosRoutes(app, ctx);
  registerPaymentRoutes(app, ctx);
  registerMerchantPaymentRoutes(app, ctx);
  registerRefundRoutes(app, ctx);
  registerMerchantRefundRoutes(app, ctx);
  registerDashboardPaymentActions(app, ctx);
  registerTransactionRoutes(app, ctx);
  registerWalletRoutes(app, ctx);
  registerCallbackRoutes(app, ctx);
  registerAdminRoutes(app, ctx);
  await registerMessagingRoutes(app, ctx);
  registerMerchantMessageRoutes(app, ctx);
  registerWebRoutes(app, ctx);
  registerPayPages(app, ctx);
  registerWalletPage(app, ctx);
  registerDashboardPage(app, ctx);
  registerAdminPage(app, ctx);
  return app;
}

/** The mock environment listener (CONTRACT §3): endpoints 1 and 2 for payers, nothing else. */
export async function buildMockApp(ctx: AppContext): Promise<App> {
  const app = createServer(ctx.log, { trustProxy: ctx.config.trustProxy });
  countRequests(app, ctx, 'mock');
  registerAuthRoutes(app, ctx, 'mock');
  return app;
}
