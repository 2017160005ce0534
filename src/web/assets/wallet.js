// The payer's wallet (/wallet): the in-browser stand-in for the phone prompt. Signs in with
// phone + PIN + OTP, keeps the token in sessionStorage (this tab only; sent as a Bearer
// header, so there is no cookie for a cross-site request to ride on), and drives the wallet
// API: balance, pending requests (refreshed every 2 s), approve with PIN, decline, history.
// Every string from the API reaches the page through textContent (el's `text` and children).
import { $, api, el, endSession, errorText, loginFlow, money, PAYMENT_STATUS, session, show, statusBadge } from './common.js';

const TOKEN_KEY = 'lipa.wallet.token';
const REFRESH_MS = 2000;
const REASONS = {
  declined_by_payer: 'declined by you',
  insufficient_funds: 'not enough money',
  cancelled_by_merchant: 'cancelled by the merchant',
};
/** What became of a request that can no longer be answered, by its status ("pending": past its expiry, not yet swept). */
const ENDED = {
  paid: 'it has been paid',
  declined: 'it has been declined',
  expired: 'it has expired',
  pending: 'it has expired',
};

let token = session.get(TOKEN_KEY);
let timer = null;
let refreshing = false;
/** Bumped on sign-out, so answers to requests made before it are dropped. */
let generation = 0;
let uid = 0;
/** paymentIdentifier → { node, busy } for the pending requests on screen. */
const cards = new Map();
let historyKey = '';

const when = (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** One API call with the session token; a 401 signs out and resolves to null. */
async function call(method, path, body) {
  const started = generation;
  const reply = await api(method, path, { token, body });
  if (started !== generation) return null;
  if (reply.status === 401) {
    signOut('Your session has ended. Please sign in again.');
    return null;
  }
  return reply;
}

function setText(node, text, className) {
  if (node.textContent !== text) node.textContent = text;
  if (className !== undefined && node.className !== className) node.className = className;
}

// ---- signing in and out ----

function showSignIn() {
  $('#wallet').hidden = true;
  $('#signin').hidden = false;
  loginFlow({
    form: $('#login-form'),
    loginLabel: 'Phone number (country code, no plus sign)',
    passwordLabel: 'Wallet PIN',
    wrongCredentials: 'The phone number or PIN is incorrect.',
    onToken: (newToken) => {
      token = newToken;
      session.set(TOKEN_KEY, newToken);
      setText($('#signin-note'), '');
      showWallet();
      $('#pending-heading').focus();
    },
  });
  // Digits only: a numeric keypad on phones, and the PIN stays a masked password field.
  const phone = $('#login');
  phone.setAttribute('inputmode', 'numeric');
  phone.setAttribute('autocomplete', 'tel');
  const pin = $('#password');
  pin.setAttribute('inputmode', 'numeric');
  pin.setAttribute('maxlength', '6');
}

function signOut(message) {
  generation++;
  token = null;
  session.clear(TOKEN_KEY);
  clearInterval(timer);
  timer = null;
  refreshing = false;
  cards.clear();
  historyKey = '';
  $('#pending').replaceChildren();
  $('#history').replaceChildren();
  for (const id of ['#wallet-phone', '#balance', '#outcome', '#connection']) setText($(id), '');
  show($('#signin-note'), message ?? 'You have signed out.', message ? 'error' : 'notice');
  showSignIn();
}

function showWallet() {
  $('#signin').hidden = true;
  $('#login-form').replaceChildren();
  $('#wallet').hidden = false;
  $('#balance').textContent = '…';
  void refresh();
  clearInterval(timer);
  timer = setInterval(() => void refresh(), REFRESH_MS);
}

// ---- the wallet ----

async function refresh() {
  if (refreshing || !token || document.hidden) return;
  refreshing = true;
  const started = generation;
  try {
    const [wallet, pending, history] = await Promise.all([
      call('GET', '/api/v1/wallet'),
      call('GET', '/api/v1/wallet/payments?status=pending'),
      call('GET', '/api/v1/wallet/payments'),
    ]);
    if (started !== generation || !wallet || !pending || !history) return;
    if (wallet.status !== 200 || pending.status !== 200 || history.status !== 200) {
      const failed = [wallet, pending, history].find((r) => r.status !== 200);
      if (failed.status === 403) {
        // Not a payer's session (a merchant's): it ends here, on the server too, as the
        // dashboard does with a payer's.
        void endSession(token);
        return signOut('That is a merchant account. Merchants use /dashboard.');
      }
      setText(
        $('#connection'),
        failed.status === 0 ? 'Cannot reach Lipa. Retrying…' : `Could not refresh your wallet: ${errorText(failed)}`,
      );
      return;
    }
    setText($('#connection'), '');
    setText($('#wallet-phone'), wallet.body.phone);
    setText($('#balance'), money(wallet.body.balance, wallet.body.currency));
    // The first page of each (the newest 100): waiting payments are few, and the history
    // shows the recent ones.
    renderPending(pending.body.data);
    renderHistory(history.body.data);
  } catch {
    if (started === generation) setText($('#connection'), 'Cannot reach Lipa. Retrying…');
  } finally {
    if (started === generation) refreshing = false;
  }
}

/** Adds new requests and drops answered ones without touching the others (a PIN being typed stays). */
function renderPending(list) {
  const container = $('#pending');
  const ids = list.map((p) => p.paymentIdentifier);
  for (const [id, card] of cards) {
    if (ids.includes(id) || card.busy) continue;
    // Gone without an answer from here: it expired, or was answered elsewhere. Say so.
    const expired = Date.parse(card.payment.expiresAt) <= Date.now();
    show(
      $('#outcome'),
      expired
        ? `The request from ${card.payment.merchantName} for ${card.amount} expired.`
        : `The request from ${card.payment.merchantName} for ${card.amount} was answered elsewhere.`,
      'error',
    );
    removeCard(id);
  }
  list.forEach((payment, index) => {
    if (cards.has(payment.paymentIdentifier)) return;
    const node = requestCard(payment);
    // Insert before the next request already on screen, so the list stays newest first.
    const next = ids
      .slice(index + 1)
      .map((id) => cards.get(id)?.node)
      .find(Boolean);
    container.insertBefore(node, next ?? null);
  });
  $('#pending-empty').hidden = cards.size > 0;
}

function removeCard(id) {
  const card = cards.get(id);
  if (!card) return;
  const hadFocus = card.node.contains(document.activeElement);
  card.node.remove();
  cards.delete(id);
  if (hadFocus) $('#pending-heading').focus();
  $('#pending-empty').hidden = cards.size > 0;
}

function requestCard(payment) {
  const id = payment.paymentIdentifier;
  const key = ++uid;
  const amount = money(payment.amount, payment.currency);
  // Each card's controls say which request they answer: a screen reader lists them apart.
  const what = `${amount} to ${payment.merchantName}, order ${payment.orderId}`;
  const pin = el('input', {
    id: `pin-${key}`,
    name: 'pin',
    type: 'password',
    inputmode: 'numeric',
    autocomplete: 'off',
    maxlength: '6',
    required: true,
    'aria-describedby': `msg-${key}`,
  });
  pin.setAttribute('aria-label', `Wallet PIN to approve ${what}`);
  const message = el('p', { id: `msg-${key}`, role: 'status', 'aria-live': 'polite' });
  const approve = el('button', { type: 'submit', text: 'Approve', 'aria-label': `Approve ${what}` });
  const decline = el('button', { type: 'button', class: 'danger', text: 'Decline', 'aria-label': `Decline ${what}` });
  const form = el(
    'form',
    { 'aria-labelledby': `req-${key}` },
    el('label', { for: `pin-${key}`, text: 'Wallet PIN to approve' }),
    pin,
    message,
    el('div', {}, approve, decline),
  );
  const node = el(
    'article',
    { class: 'card', 'aria-labelledby': `req-${key}` },
    el('h3', { id: `req-${key}`, text: `${payment.merchantName} requests ${amount}` }),
    el('p', { class: 'amount', text: amount }),
    el(
      'dl',
      { class: 'fields' },
      el('dt', { text: 'Merchant' }),
      el('dd', { text: payment.merchantName }),
      el('dt', { text: 'Order' }),
      el('dd', { text: payment.orderId }),
      payment.description ? [el('dt', { text: 'Description' }), el('dd', { text: payment.description })] : null,
      el('dt', { text: 'Expires' }),
      el('dd', { text: when(payment.expiresAt) }),
    ),
    form,
  );
  const card = { node, busy: false, payment, amount };
  cards.set(id, card);

  const setBusy = (busy) => {
    card.busy = busy;
    approve.disabled = busy;
    decline.disabled = busy;
  };

  async function answer(action) {
    if (card.busy) return;
    if (action === 'accept' && pin.value === '') {
      show(message, 'Enter your wallet PIN to approve.');
      pin.focus();
      return;
    }
    setBusy(true);
    show(message, action === 'accept' ? 'Approving…' : 'Declining…', 'muted');
    const path = `/api/v1/wallet/payments/${encodeURIComponent(id)}/${action}`;
    const reply = await call('POST', path, action === 'accept' ? { pin: pin.value } : undefined);
    pin.value = '';
    if (reply === null) return; // signed out
    setBusy(false);
    if (reply.status === 200) {
      const { status, reason } = reply.body;
      if (status === 'paid') finish(`Paid ${amount} to ${payment.merchantName} for order ${payment.orderId}.`, 'notice');
      else if (reason === 'insufficient_funds')
        finish(`Declined: your balance is too low to pay ${amount} to ${payment.merchantName}.`, 'error');
      else finish(`You declined ${amount} to ${payment.merchantName} for order ${payment.orderId}.`, 'notice');
    } else if (reply.status === 409) {
      finish(`The request from ${payment.merchantName} for ${amount} can no longer be answered: ${await whatBecameOf(id)}.`, 'error');
    } else if (reply.status === 403 && reply.body?.error?.code === 'invalid_pin') {
      // The API's words say how many tries are left, or that approvals are now locked.
      const said = reply.body.error.message;
      show(message, said.includes('now locked') ? said : `${said} The payment is still waiting for you.`);
      pin.focus();
    } else {
      show(message, errorText(reply));
      pin.focus();
    }
  }

  /** In words, what became of a payment that can no longer be answered (from the history). */
  async function whatBecameOf(paymentId) {
    const history = await call('GET', '/api/v1/wallet/payments');
    const status = history?.status === 200 ? history.body.data.find((p) => p.paymentIdentifier === paymentId)?.status : undefined;
    return ENDED[status] ?? 'it was already answered or has expired';
  }

  function finish(text, kind) {
    show($('#outcome'), text, kind);
    removeCard(id);
    void refresh();
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void answer('accept');
  });
  decline.addEventListener('click', () => {
    // Declining cannot be undone: ask first.
    if (window.confirm(`Decline ${what}? This cannot be undone.`)) void answer('decline');
  });
  return node;
}

function renderHistory(list) {
  const key = JSON.stringify(list);
  if (key === historyKey) return; // unchanged: leave the table (and screen readers) alone
  historyKey = key;
  $('#history-empty').hidden = list.length > 0;
  if (list.length === 0) return $('#history').replaceChildren();
  const rows = list.map((p) =>
    el(
      'tr',
      {},
      // data-label and one span per cell: on a phone, app.css stacks each row into a card
      // (a title column, then the cell's content), like the consoles' tables.
      el(
        'td',
        { 'data-label': 'Payment' },
        el(
          'span',
          {},
          el('span', { text: p.merchantName }),
          el('br'),
          el('span', { class: 'muted', text: `Order ${p.orderId}` }),
          p.description ? [el('br'), el('span', { class: 'muted', text: p.description })] : null,
          el('br'),
          el('span', { class: 'muted', text: when(p.createdAt) }),
        ),
      ),
      el(
        'td',
        { class: 'nowrap', 'data-label': 'Amount' },
        el(
          'span',
          {},
          el('span', { text: money(p.amount, p.currency) }),
          // Money the merchant gave back is in the balance already: the payment says where it came from.
          p.refundedAmount > 0
            ? [el('br'), el('span', { class: 'refunded', text: `Refunded ${money(p.refundedAmount, p.currency)}` })]
            : null,
        ),
      ),
      el(
        'td',
        { class: 'nowrap', 'data-label': 'Status' },
        el(
          'span',
          {},
          statusBadge(p.status, PAYMENT_STATUS),
          p.reason ? [el('br'), el('span', { class: 'muted', text: REASONS[p.reason] ?? p.reason })] : null,
        ),
      ),
    ),
  );
  $('#history').replaceChildren(
    el(
      'div',
      { class: 'table-wrap', role: 'region', 'aria-label': 'Payment history', tabindex: '0' },
      el(
        'table',
        {},
        el('caption', { class: 'visually-hidden', text: 'Your payments, newest first' }),
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ['Payment', 'Amount', 'Status'].map((h) => el('th', { scope: 'col', text: h })),
          ),
        ),
        el('tbody', {}, rows),
      ),
    ),
  );
}

document.addEventListener('visibilitychange', () => {
  if (!document.hidden) void refresh();
});
$('#sign-out').addEventListener('click', () => {
  if (token) void endSession(token);
  signOut();
});

if (token) showWallet();
else showSignIn();
