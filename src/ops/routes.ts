import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { DatabaseNotReady } from '../db/database.js';
import { AppError } from '../http/errors.js';
import { errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { registerMetrics } from './metrics.js';

export function registerOpsRoutes(app: App, ctx: AppContext): void {
  const tags = ['Operations'];
  app.get(
    '/health',
    { schema: { tags, summary: 'Liveness', response: { 200: Type.Object({ status: Type.Literal('ok') }) } } },
    async () => ({
      status: 'ok' as const,
    }),
  );

  app.get(
    '/ready',
    {
      schema: {
        tags,
        summary: 'Readiness: the database answers',
        response: { 200: Type.Object({ status: Type.Literal('ready') }), ...errors(503) },
      },
    },
    async (request) => {
      try {
        await ctx.store.ping();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed');
        throw new AppError('not_ready', error instanceof DatabaseNotReady ? error.message : 'The database does not answer.');
      }
      return { status: 'ready' as const };
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  registerMetrics(app, ctx);
}
