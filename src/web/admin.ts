import type { AppContext } from '../context.js';
import type { App } from '../http/types.js';
import { html, page } from './html.js';
import { sendPage } from './routes.js';

/**
 * `GET /admin` (CONTRACT §10): the operator's console. The page never carries the
 * ADMIN_TOKEN: the operator types it in, admin.js keeps it in sessionStorage and the
 * operator API checks it on every call.
 */
export function registerAdminPage(app: App, ctx: AppContext): void {
  app.get('/admin', { schema: { hide: true } }, async (_request, reply) => {
    const production = ctx.config.env === 'production';
    return sendPage(
      reply,
      page({
        title: 'Operator console',
        script: 'admin.js',
        data: { env: ctx.config.env },
        body: html`<div id="app">
<h1>Operator console</h1>
<p>${
          production
            ? 'This console needs the ADMIN_TOKEN of this deployment.'
            : 'Staging: the console needs the ADMIN_TOKEN (printed at start unless set).'
        }</p>
<noscript><p class="error">The console needs JavaScript.</p></noscript>
</div>`,
      }),
    );
  });
}
