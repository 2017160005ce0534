import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import type { DeclineReason, PaymentStatus, PaymentTable } from '../db/schema.js';
import { AppError, errorHandler, logFailure, toAppError } from '../http/errors.js';
import { errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { PaymentStatusSchema } from '../payments/schemas.js';
import { isDue } from '../payments/transitions.js';
import { formatAmount } from '../wallet/prompt.js';
import { type Html, html, page } from './html.js';
import { sendPage } from './routes.js';

/** A payment as the hosted page needs it: the row and its point of sale's company name. */
type PagePayment = PaymentTable & { pos_company_name: string };

const FINAL: readonly PaymentStatus[] = ['paid', 'declined', 'expired'];

/** Identifiers are `pay_` + hex; anything else cannot be a payment (no database trip). */
const PAYMENT_ID = /^pay_[0-9a-f]{12,64}$/;

async function findPagePayment(ctx: AppContext, id: string): Promise<PagePayment | undefined> {
  if (!PAYMENT_ID.test(id)) return undefined;
  return ctx.store.db
    .selectFrom('payments as p')
    .innerJoin('points_of_sale as s', 's.id', 'p.pos_id')
    .selectAll('p')
    .select('s.pos_company_name')
    .where('p.id', '=', id)
    .executeTakeFirst();
}

/**
 * The status the payer should see. A pending or no_user payment past its expiry time can no
 * longer move anywhere but `expired` (transitions.ts refuses every other move after it), so
 * the page says so even before the expiry sweep has written it.
 */
export function visibleStatus(ctx: AppContext, p: Pick<PaymentTable, 'status' | 'expires_at'>): PaymentStatus {
  if (isDue(p, ctx.now())) return 'expired';
  return p.status;
}

/** `254708000001` → `2547•••••001`: country code and first digit, then the last three. */
export function maskPhone(phone: string): string {
  const keepEnd = 3;
  // At least four digits stay hidden, however short the number.
  const keepStart = Math.max(0, Math.min(4, phone.length - keepEnd - 4));
  const hidden = phone.length - keepStart - keepEnd;
  return `${phone.slice(0, keepStart)}${'•'.repeat(Math.max(hidden, 0))}${phone.slice(phone.length - keepEnd)}`;
}

/** The sentence under the status badge (also sent to the page's script). */
export function statusMessage(status: PaymentStatus, reason: DeclineReason | null | undefined): string {
  switch (status) {
    case 'pending':
      return 'Check your phone to approve this payment.';
    case 'no_user':
      return 'This phone number has no Lipa wallet yet. Open a Lipa wallet to approve this payment before the request expires.';
    case 'paid':
      return 'Payment received. Thank you!';
    case 'declined':
      if (reason === 'insufficient_funds') return 'The payment was declined: there was not enough money in the wallet.';
      if (reason === 'cancelled_by_merchant') return 'The merchant cancelled this payment request.';
      return 'The payer declined this payment.';
    case 'expired':
      return 'This payment request has expired without an answer. Ask the merchant for a new one.';
  }
}

export const STATUS_LABELS: Record<PaymentStatus, string> = {
  pending: 'Waiting for approval',
  no_user: 'No wallet yet',
  paid: 'Paid',
  declined: 'Declined',
  expired: 'Expired',
};

/**
 * Where the browser goes once the payment is paid: the merchant's successRedirectUrl with
 * paymentIdentifier and orderId added to its query string. The merchant's own parameters are
 * kept byte for byte (they may be signed), but for any of those two names, which ours
 * replace; the fragment stays last. Only http(s) URLs, and only once paid.
 */
export function successRedirect(p: Pick<PaymentTable, 'id' | 'order_id' | 'success_redirect_url'>, status: PaymentStatus): string | null {
  if (status !== 'paid' || !p.success_redirect_url) return null;
  let url: URL;
  try {
    url = new URL(p.success_redirect_url);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  const ours = { paymentIdentifier: p.id, orderId: p.order_id };
  const kept = url.search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '' && !Object.hasOwn(ours, parameterName(pair)));
  const added = Object.entries(ours).map(([name, value]) => `${name}=${encodeURIComponent(value)}`);
  // The setter leaves what is already encoded as it is.
  url.search = `?${[...kept, ...added].join('&')}`;
  return url.toString();
}

/** A query parameter's name as a form decoder reads it (+ is a space); the raw text if it is not valid percent-encoding. */
function parameterName(pair: string): string {
  const raw = pair.split('=', 1)[0] ?? '';
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return raw;
  }
}

function paymentPage(ctx: AppContext, p: PagePayment): string {
  const status = visibleStatus(ctx, p);
  const redirect = successRedirect(p, status);
  const amount = `${p.currency} ${formatAmount(p.amount)}`;
  const body: Html = html`<h1>Pay ${p.pos_company_name}</h1>
<section class="card" aria-labelledby="amount-label">
<p id="amount-label" class="muted">Amount to pay</p>
<p class="amount" id="amount">${amount}</p>
<dl class="fields">
<dt>Merchant</dt><dd id="merchant">${p.pos_company_name}</dd>
<dt>Order</dt><dd id="order">${p.order_id}</dd>
${p.description ? html`<dt>Description</dt><dd id="description">${p.description}</dd>` : ''}
<dt>Phone</dt><dd id="phone">${maskPhone(p.payer_phone)}</dd>
</dl>
</section>
<section class="card" aria-labelledby="status-heading">
<h2 id="status-heading">Status</h2>
<p><span id="status-badge" class="status status-${status}">${STATUS_LABELS[status]}</span></p>
<p id="status-text" role="status" aria-live="polite">${statusMessage(status, p.reason)}</p>
<p id="expires" class="muted" hidden></p>
<p id="redirect"${redirect ? '' : html` hidden`}><a id="redirect-link" href="${redirect ?? '#'}">Return to ${p.pos_company_name}</a></p>
</section>
<noscript><p class="muted">Reload this page to see the latest status.</p></noscript>`;
  const left = secondsLeft(ctx, p, status);
  return page({
    title: `Pay ${p.pos_company_name}`,
    script: 'pay.js',
    body,
    data: { payment: p.id, status, ...(left === null ? {} : { 'seconds-left': String(left) }) },
  });
}

function notFoundPage(): string {
  return page({
    title: 'Payment not found',
    body: html`<h1>Payment not found</h1>
<p>There is no payment request at this address. Check the link the merchant gave you, or ask the merchant for a new one.</p>`,
  });
}

/** The page when the payment cannot be read now (the database is down, say): the consumer is told to retry. */
function unavailablePage(): string {
  return page({
    title: 'Payment page unavailable',
    body: html`<h1>This page is unavailable for a moment</h1>
<p>We cannot show this payment request right now. Reload the page in a few seconds; nothing about the payment has changed.</p>`,
  });
}

// No length limit: an id of any length that is not a payment's is a 404 (findPagePayment checks its form).
const PayParams = Type.Object({ paymentIdentifier: Type.String() });

export const PayStatus = Type.Object({
  status: PaymentStatusSchema,
  reason: Type.Optional(
    Type.Union([Type.Literal('declined_by_payer'), Type.Literal('insufficient_funds'), Type.Literal('cancelled_by_merchant')]),
  ),
  message: Type.String({ description: 'A sentence for the payer' }),
  final: Type.Boolean({ description: 'true once the status can no longer change' }),
  redirectUrl: Type.Union([Type.String(), Type.Null()], {
    description: 'Once paid: the successRedirectUrl with paymentIdentifier and orderId added; otherwise null',
  }),
  secondsLeft: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
    description: 'While the payment can still be answered: whole seconds until it expires, by the server clock; otherwise null',
  }),
});

/** Whole seconds until the payment expires while it can still be answered (by the server clock, not the browser's); else null. */
function secondsLeft(ctx: AppContext, p: Pick<PaymentTable, 'expires_at'>, status: PaymentStatus): number | null {
  return FINAL.includes(status) ? null : Math.max(0, Math.ceil((p.expires_at - ctx.now()) / 1000));
}

/** The hosted payment page (CONTRACT §10) and the status its script polls. Public: the identifier is unguessable. */
export function registerPayPages(app: App, ctx: AppContext): void {
  // A browser asked for a page: a failure on our side is a page too (with the API's status and
  // Retry-After), not a JSON body. A refusal (none is expected: the id is not checked by a
  // schema) would keep the error body.
  const pageErrorHandler = (error: Error, request: FastifyRequest, reply: FastifyReply) => {
    const refusal = toAppError(error);
    if (refusal.status < 500) return errorHandler(error as FastifyError, request, reply);
    logFailure(request, error, refusal);
    for (const [name, value] of Object.entries(refusal.headers ?? {})) reply.header(name, value);
    return sendPage(reply, unavailablePage(), refusal.status);
  };
  app.get(
    '/pay/:paymentIdentifier',
    { schema: { hide: true, params: PayParams }, errorHandler: pageErrorHandler },
    async (request, reply) => {
      const payment = await findPagePayment(ctx, request.params.paymentIdentifier);
      if (!payment) return sendPage(reply, notFoundPage(), 404);
      return sendPage(reply, paymentPage(ctx, payment));
    },
  );

  app.get(
    '/pay/:paymentIdentifier/status',
    {
      schema: {
        tags: ['Pages'],
        summary: 'The live status of a hosted payment page (public; polled by /pay/{paymentIdentifier})',
        params: PayParams,
        response: { 200: PayStatus, ...errors(404) },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const payment = await findPagePayment(ctx, request.params.paymentIdentifier);
      if (!payment) throw new AppError('not_found', 'No such payment.');
      const status = visibleStatus(ctx, payment);
      return {
        status,
        ...(status === 'declined' && payment.reason ? { reason: payment.reason } : {}),
        message: statusMessage(status, payment.reason),
        final: FINAL.includes(status),
        redirectUrl: successRedirect(payment, status),
        secondsLeft: secondsLeft(ctx, payment, status),
      };
    },
  );
}
