import type { AppContext } from '../context.js';
import type { App } from '../http/types.js';
import { html, page } from './html.js';
import { sendPage } from './routes.js';

/**
 * `GET /dashboard` (CONTRACT §10): the merchant's console. The shell only; dashboard.js signs
 * in (login + password + OTP) and does everything through the public API with the token.
 */
export function registerDashboardPage(app: App, _ctx: AppContext): void {
  app.get('/dashboard', { schema: { hide: true } }, async (_request, reply) =>
    sendPage(
      reply,
      page({
        title: 'Merchant dashboard',
        script: 'dashboard.js',
        body: html`<div id="app">
<h1>Merchant dashboard</h1>
<p class="muted">Loading…</p>
<noscript><p class="error">The dashboard needs JavaScript.</p></noscript>
</div>`,
      }),
    ),
  );
}
