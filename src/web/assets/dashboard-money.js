// The dashboard's money (/dashboard, loaded by dashboard.js): the merchant's balance, its
// transactions (filters, More, a CSV download), and on a payment's detail the refunds and
// the cancellation. Every call goes through the API with the merchant's token, given by
// dashboard.js as `call`; strings from the API reach the page as text only.
import { el, errorText, field, money, onPress, onSubmit, pagedList, pagePath, problem, show, statusLine, table, when } from './common.js';

/** The transaction types of the API, in words. */
const TYPES = { payment: 'Payment', refund: 'Refund', payout: 'Payout', settlement: 'Settlement' };
/** Entries a page of the Transactions tab holds; the CSV has every entry of the range. */
const TRANSACTIONS_PAGE = 20;
/** The statuses a merchant can still cancel. */
const CANCELLABLE = ['pending', 'no_user'];

/** What a request that got no answer says: it may have been done, and retrying is safe. */
const NO_ANSWER = 'No answer came: the refund may or may not have been made. Press Refund again to retry: it cannot refund twice.';

/**
 * The balance line above the tabs: `refresh()` reads GET /api/v1/balance again (after a refund,
 * on opening the Transactions tab). A failure is said on the line, not swallowed.
 */
export function balanceLine(call) {
  const amount = el('strong', { id: 'balance', text: '…' });
  const note = el('span', { class: 'muted' });
  const node = el('p', { class: 'balance', role: 'status', 'aria-live': 'polite' }, 'Balance ', amount, ' ', note);
  let reads = 0;
  const refresh = async () => {
    const asked = ++reads;
    const reply = await call('GET', '/api/v1/balance');
    if (asked !== reads) return;
    if (reply.status !== 200) {
      amount.textContent = '—';
      return show(note, `Could not read the balance: ${errorText(reply)}`);
    }
    amount.textContent = money(reply.body.available, reply.body.currency);
    show(note, `updated ${when(reply.body.updatedAt)}`, 'muted');
  };
  return { node, refresh };
}

/** A date input's value (yyyy-mm-dd, the reader's day) as the instant that day starts where the reader is. */
function startOfDay(value, daysLater = 0) {
  const [year, month, day] = value.split('-').map(Number);
  return new Date(year, month - 1, day + daysLater).toISOString();
}

/**
 * The Transactions tab: the merchant's ledger entries, newest first, filtered by type and by
 * days (from the first day chosen to the last, both whole, in the reader's time zone), a page
 * at a time, and "Download CSV" of the same filters.
 */
export function transactionsView({ call, token, signOut, balance }) {
  return async (panel) => {
    const typeSelect = el(
      'select',
      { id: 'tx-type', name: 'type' },
      el('option', { value: '', text: 'Any type' }),
      Object.entries(TYPES).map(([value, text]) => el('option', { value, text })),
    );
    const fromInput = el('input', { id: 'tx-from', name: 'from', type: 'date' });
    const toInput = el('input', { id: 'tx-to', name: 'to', type: 'date', 'aria-describedby': 'tx-to-hint' });
    const listStatus = statusLine();
    const list = el('div');
    const csvStatus = statusLine();
    const filters = el(
      'form',
      { role: 'search', 'aria-label': 'Find transactions' },
      field('tx-type', 'Type', typeSelect),
      field('tx-from', 'From (day)', fromInput),
      field('tx-to', 'To (day, included)', toInput, 'Days are yours: they start and end at midnight where you are.'),
      el('div', {}, el('button', { type: 'submit', text: 'Search' })),
    );
    filters.addEventListener('submit', (event) => {
      event.preventDefault();
      void refresh();
    });
    typeSelect.addEventListener('change', () => void refresh());

    /** The filters of the list shown: its next pages and the CSV are read with them. */
    let searched = {};
    const read = pagedList({
      read: (cursor) => call('GET', pagePath('/api/v1/transactions', { ...searched, limit: String(TRANSACTIONS_PAGE) }, cursor)),
      fail: (reply) => show(listStatus, problem(reply, filters, 'tx-')),
      draw: (rows, more) => {
        const count = `${rows.length} transaction${rows.length === 1 ? '' : 's'}`;
        show(listStatus, more ? `${count} so far; More reads the next ones.` : `${count}.`, 'muted');
        list.replaceChildren(
          table({
            caption: 'Transactions, newest first',
            empty: 'No transactions match.',
            rows,
            columns: [
              { title: 'When', cell: (t) => when(t.occurredAt) },
              { title: 'Type', cell: (t) => TYPES[t.type] ?? t.type },
              { title: 'Amount', cell: (t) => el('span', { class: 'nowrap', text: money(t.amount, t.currency) }) },
              { title: 'Balance after', cell: (t) => el('span', { class: 'nowrap', text: money(t.balanceAfter, t.currency) }) },
              {
                title: 'Reference',
                cell: (t) => el('span', {}, el('code', { text: t.reference }), t.orderId ? [el('br'), `Order ${t.orderId}`] : null),
              },
            ],
          }),
          more ?? '',
        );
      },
    });

    /** Reads the filters; false (and says why) when the days are the wrong way round. */
    function readFilters() {
      const chosen = {};
      if (typeSelect.value) chosen.type = typeSelect.value;
      if (fromInput.value) chosen.from = startOfDay(fromInput.value);
      // The last day is included: the range ends where the next day starts.
      if (toInput.value) chosen.to = startOfDay(toInput.value, 1);
      if (chosen.from && chosen.to && chosen.from >= chosen.to) {
        toInput.setAttribute('aria-invalid', 'true');
        show(listStatus, 'To (day, included) must be the same day as From or later.');
        toInput.focus();
        return null;
      }
      toInput.removeAttribute('aria-invalid');
      return chosen;
    }

    async function refresh() {
      const chosen = readFilters();
      if (!chosen) return;
      searched = chosen;
      await Promise.all([read(), balance.refresh()]);
    }

    const download = onPress(el('button', { type: 'button', class: 'secondary', text: 'Download CSV' }), async () => {
      show(csvStatus, 'Preparing the CSV…', 'muted');
      const saved = await saveCsv(pagePath('/api/v1/transactions.csv', searched, null), token());
      if (saved.status === 401) return signOut('Your session has ended. Sign in again.');
      if (saved.status !== 200) return show(csvStatus, errorText(saved));
      show(csvStatus, 'Downloaded lipa-transactions.csv.', 'notice');
    });

    panel.replaceChildren(
      el('h2', { text: 'Transactions' }),
      el('p', { class: 'muted', text: 'Every movement of your balance: payments in, refunds and settlements out.' }),
      filters,
      el('div', {}, download, csvStatus),
      listStatus,
      list,
    );
    await refresh();
  };
}

/**
 * Fetches the CSV with the bearer token (in a header, never in a URL) and hands it to the
 * browser as a file through an object URL. Resolves to {status} (0: no answer), with the
 * error body when it was not a CSV.
 */
async function saveCsv(path, token) {
  let response;
  let blob;
  try {
    response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
    blob = await response.blob();
  } catch {
    return { status: 0 };
  }
  if (response.status !== 200) {
    let body = null;
    try {
      body = JSON.parse(await blob.text());
    } catch {
      // not JSON: errorText falls back to its own words
    }
    return { status: response.status, body };
  }
  const url = URL.createObjectURL(new Blob([blob], { type: 'text/csv' }));
  const link = el('a', { href: url, download: 'lipa-transactions.csv', hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // The browser has taken the file once the click is handled: the URL can go after that.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return { status: 200 };
}

/** A reference for one refund the merchant asks for: random, so that it never collides with another. */
function newReference() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `dash-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * The money part of a payment's detail: for a paid payment its refunds and a Refund form, for
 * a pending one a Cancel button. `update(payment)` redraws it for the payment as read again;
 * `changed()` is called after a refund or a cancellation so the detail and balance follow.
 */
export function paymentMoney({ call, payment, changed }) {
  const node = el('div');
  const outcome = el('p', { role: 'status', 'aria-live': 'polite', tabindex: '-1' });
  let shown = null;
  let refunds = null;

  function update(fresh) {
    const drawnFor = shown;
    shown = fresh;
    if (drawnFor && drawnFor.status === fresh.status) return refunds?.update(fresh);
    refunds = null;
    if (fresh.status === 'paid') {
      refunds = refundsPart();
      node.replaceChildren(refunds.node, outcome);
      refunds.update(fresh);
      void refunds.list();
    } else if (CANCELLABLE.includes(fresh.status)) {
      node.replaceChildren(cancelPart(), outcome);
    } else {
      node.replaceChildren(outcome);
    }
  }

  function cancelPart() {
    const what = `${money(shown.amount, shown.currency)}, order ${shown.orderId}`;
    const button = onPress(el('button', { type: 'button', class: 'danger', text: 'Cancel payment' }), async () => {
      if (!window.confirm(`Cancel the request for ${what}? The payer can no longer pay it. This cannot be undone.`)) return;
      const reply = await call('POST', `/api/v1/payments/${encodeURIComponent(shown.paymentIdentifier)}/cancel`);
      if (reply.status === 200) show(outcome, `Cancelled: the request for ${what} is declined.`, 'notice');
      else show(outcome, errorText(reply));
      // Either way the payment is read again: the 409 of one already answered says what it became.
      await changed();
      if (!node.contains(button)) outcome.focus();
    });
    return el('div', {}, el('h4', { text: 'Cancel' }), el('p', { class: 'muted', text: 'The payer has not answered yet.' }), button);
  }

  function refundsPart() {
    const listNode = el('div', {}, el('p', { class: 'muted', text: 'Loading refunds…' }));
    const amount = el('input', {
      id: 'refund-amount',
      name: 'amount',
      type: 'number',
      min: '0.01',
      step: '0.01',
      inputmode: 'decimal',
      'aria-describedby': 'refund-amount-hint',
    });
    const reason = el('input', { id: 'refund-reason', name: 'reason', maxlength: '200' });
    const formStatus = statusLine();
    const hint = el('p', { class: 'hint', id: 'refund-amount-hint' });
    const form = el(
      'form',
      { 'aria-labelledby': 'refund-new' },
      el('h4', { id: 'refund-new', text: 'Refund' }),
      el('label', { for: 'refund-amount', text: 'Amount (KES)' }),
      amount,
      hint,
      field('refund-reason', 'Reason (optional)', reason, 'Shown to you and sent in the refund callback.'),
      el('div', {}, el('button', { type: 'submit', text: 'Refund' })),
    );
    const full = el('p', { class: 'muted', text: 'Refunded in full.' });
    const left = () => Math.round((shown.amount - (shown.refundedAmount ?? 0)) * 100) / 100;
    /** The refund asked for and its reference, kept until it has an answer: a retry of it sends the same reference. */
    let asked = null;

    onSubmit(form, async () => {
      const body = {};
      if (amount.value !== '') body.amount = Number(amount.value);
      if (reason.value.trim()) body.reason = reason.value.trim();
      const key = JSON.stringify(body);
      const sum = money(body.amount ?? left(), shown.currency);
      if (!window.confirm(`Refund ${sum} of order ${shown.orderId} to the payer? It is paid from your balance and cannot be undone.`)) {
        return;
      }
      if (asked?.key !== key) asked = { key, reference: newReference() };
      show(formStatus, 'Refunding…', 'muted');
      const reply = await call('POST', `/api/v1/payments/${encodeURIComponent(shown.paymentIdentifier)}/refunds`, {
        refundReference: asked.reference,
        ...body,
      });
      if (reply.status === 0 || reply.status >= 500) return show(formStatus, reply.status === 0 ? NO_ANSWER : errorText(reply));
      asked = null;
      if (reply.status !== 201 && reply.status !== 200) return show(formStatus, problem(reply, form, 'refund-'));
      form.reset();
      show(formStatus, `Refunded ${money(reply.body.amount, reply.body.currency)} to the payer.`, 'notice');
      await Promise.all([changed(), list()]);
    });

    const list = pagedList({
      read: (cursor) => call('GET', pagePath(`/api/v1/payments/${encodeURIComponent(shown.paymentIdentifier)}/refunds`, {}, cursor)),
      fail: (reply) => listNode.replaceChildren(el('p', { class: 'error', text: errorText(reply) })),
      draw: (rows, more) =>
        listNode.replaceChildren(
          table({
            caption: 'Refunds of this payment, newest first',
            empty: 'No refunds yet.',
            rows,
            columns: [
              { title: 'When', cell: (r) => when(r.createdAt) },
              { title: 'Amount', cell: (r) => el('span', { class: 'nowrap', text: money(r.amount, r.currency) }) },
              { title: 'Reason', cell: (r) => r.reason ?? '—' },
              { title: 'Refund ID', cell: (r) => el('code', { text: r.refundIdentifier }) },
            ],
          }),
          more ?? '',
        ),
    });

    return {
      node: el('div', {}, el('h4', { text: 'Refunds' }), listNode, form, full, formStatus),
      list,
      update: (fresh) => {
        shown = fresh;
        const rest = left();
        form.hidden = rest <= 0;
        full.hidden = rest > 0;
        hint.textContent = `At most ${money(rest, fresh.currency)}, what is still refundable. Empty: all of it.`;
      },
    };
  }

  update(payment);
  return { node, update };
}
