// The hosted payment page (/pay/{paymentIdentifier}): the server renders the payment; this
// script keeps its status live by polling /pay/{id}/status once a second, and sends the
// browser to the merchant's success page once the payment is paid. Text only via textContent.
import { api, PAYMENT_STATUS as LABELS } from './common.js';

const FINAL = new Set(['paid', 'declined', 'expired']);
const POLL_MS = 1000;

const paymentId = document.body.dataset.payment;
const badge = document.getElementById('status-badge');
const text = document.getElementById('status-text');
const redirectBox = document.getElementById('redirect');
const redirectLink = document.getElementById('redirect-link');

let shown = { status: document.body.dataset.status, message: text?.textContent ?? '' };
let failures = 0;

/**
 * How long the request can still be answered, counted down once a second from the server's
 * last word (its clock, not this device's, which may be wrong). Not a live region: a screen
 * reader hears the status changes, not every second.
 */
const expires = document.getElementById('expires');
let deadline = null;
function expiresIn(seconds) {
  if (typeof seconds !== 'number') deadline = null;
  else {
    // The server counts whole seconds, rounded up: a deadline within a second of the one
    // kept is the same deadline, kept, so that the count neither sticks nor skips.
    const told = performance.now() + seconds * 1000;
    if (deadline === null || told < deadline - 1000 || told > deadline + 1000) deadline = told;
  }
  tick();
}
function tick() {
  if (!expires) return;
  if (deadline === null) {
    expires.hidden = true;
    return;
  }
  const left = Math.max(0, Math.ceil((deadline - performance.now()) / 1000));
  expires.textContent =
    left > 0 ? `This request expires in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}.` : 'This request is expiring now.';
  expires.hidden = false;
}
setInterval(tick, 1000);
const initial = document.body.dataset.secondsLeft;
expiresIn(initial === undefined ? null : Number(initial));

/** Only absolute http(s) URLs are followed (they were validated when the payment was created). */
function safeRedirect(value) {
  if (typeof value !== 'string') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}

function render(answer) {
  const status = answer.status in LABELS ? answer.status : 'pending';
  if (status !== shown.status) {
    badge.className = `status status-${status}`;
    badge.textContent = LABELS[status];
  }
  // Only a changed sentence goes into the live region, so it is announced once.
  if (typeof answer.message === 'string' && answer.message !== shown.message) text.textContent = answer.message;
  shown = { status, message: answer.message ?? shown.message };
}

/** Says so when the status has not been checked for a while: the one shown may be old. */
const connection = document.createElement('p');
connection.className = 'muted';
text?.after(connection);

async function poll() {
  const reply = await api('GET', `/pay/${encodeURIComponent(paymentId)}/status`);
  if (reply.status === 200 && reply.body && typeof reply.body.status === 'string') {
    failures = 0;
    connection.textContent = '';
    render(reply.body);
    expiresIn(reply.body.secondsLeft);
    const target = reply.body.status === 'paid' ? safeRedirect(reply.body.redirectUrl) : null;
    if (target) {
      redirectLink.href = target;
      redirectBox.hidden = false;
      text.textContent = `${reply.body.message} Taking you back to the merchant…`;
      location.assign(target);
      return;
    }
    if (FINAL.has(reply.body.status) || reply.body.final === true) return; // nothing more can change
  } else if (reply.status === 404) {
    text.textContent = 'This payment request no longer exists.';
    expiresIn(null);
    return;
  } else {
    failures++;
    if (failures >= 3) connection.textContent = 'The status cannot be checked right now; trying again…';
  }
  // Back off gently while the service cannot be reached; keep trying.
  setTimeout(poll, failures === 0 ? POLL_MS : Math.min(POLL_MS * 2 ** failures, 15_000));
}

if (paymentId && badge && text) void poll();
