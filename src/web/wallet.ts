import type { AppContext } from '../context.js';
import type { App } from '../http/types.js';
import { html, page } from './html.js';
import { sendPage } from './routes.js';

/**
 * The payer's wallet in a browser (CONTRACT §10): the in-browser stand-in for the phone
 * prompt. The server sends the shell; wallet.js signs in (phone + PIN + OTP) and drives the
 * same wallet API a phone would, with the token in sessionStorage (no cookie, so no CSRF).
 */
function walletPage(): string {
  return page({
    title: 'Wallet',
    script: 'wallet.js',
    body: html`<h1>Your Lipa wallet</h1>
<section id="signin" aria-labelledby="signin-heading">
<h2 id="signin-heading">Sign in</h2>
<p class="muted">Enter your phone number (country code, no plus sign) and wallet PIN. We then send a one-time code to your phone by SMS.</p>
<p id="signin-note" role="status" aria-live="polite"></p>
<div id="login-form"></div>
</section>
<section id="wallet" hidden aria-label="Wallet">
<div class="bar">
<p>Signed in as <strong id="wallet-phone"></strong></p>
<button type="button" id="sign-out" class="secondary">Sign out</button>
</div>
<section class="card" aria-labelledby="balance-heading">
<h2 id="balance-heading">Balance</h2>
<p class="amount" id="balance">…</p>
</section>
<p id="connection" class="error" role="status" aria-live="polite"></p>
<p id="outcome" role="status" aria-live="polite"></p>
<section aria-labelledby="pending-heading">
<h2 id="pending-heading" tabindex="-1">Requests waiting for you</h2>
<p id="pending-empty" class="muted">No payment requests are waiting. New ones appear here by themselves.</p>
<div id="pending"></div>
</section>
<section aria-labelledby="history-heading">
<h2 id="history-heading">History</h2>
<p id="history-empty" class="muted">No payments yet.</p>
<div id="history"></div>
</section>
</section>
<noscript><p class="error">The wallet needs JavaScript.</p></noscript>`,
  });
}

export function registerWalletPage(app: App, _ctx: AppContext): void {
  app.get('/wallet', { schema: { hide: true } }, async (_request, reply) => sendPage(reply, walletPage()));
}
