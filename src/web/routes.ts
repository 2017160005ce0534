import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import { AppError, shown } from '../http/errors.js';
import type { App } from '../http/types.js';

/** Strict CSP for every page: scripts and styles from this origin only, nothing inline. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const ASSETS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'assets');
const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Assets are read once at start; the set is fixed (no path from the request reaches the disk). */
function loadAssets(): Map<string, { body: string; type: string }> {
  const assets = new Map<string, { body: string; type: string }>();
  for (const name of ['app.css', 'common.js', 'pay.js', 'wallet.js', 'dashboard.js', 'dashboard-money.js', 'admin.js']) {
    try {
      const ext = name.slice(name.lastIndexOf('.'));
      assets.set(name, { body: readFileSync(join(ASSETS_DIR, name), 'utf8'), type: TYPES[ext] ?? 'application/octet-stream' });
    } catch {
      // an asset not written yet is simply not served
    }
  }
  return assets;
}

export function sendPage(reply: FastifyReply, body: string, status = 200): FastifyReply {
  return reply
    .code(status)
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('x-frame-options', 'DENY')
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(body);
}

export function registerWebRoutes(app: App, _ctx: AppContext): void {
  const assets = loadAssets();
  app.get(
    '/assets/:name',
    { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 64 }) }) } },
    async (request, reply) => {
      const asset = assets.get(request.params.name);
      if (!asset) throw new AppError('not_found', `No asset ${shown(request.params.name)}.`);
      return reply.header('cache-control', 'public, max-age=300').type(asset.type).send(asset.body);
    },
  );
}
