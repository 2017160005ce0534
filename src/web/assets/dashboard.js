// The merchant dashboard (/dashboard). Every action goes through the public JSON API with the
// merchant's bearer token, kept in sessionStorage (this tab only). Every string that came
// from a user (company names, descriptions, order ids, message content, URLs) reaches the
// page through textContent (el() children and `text`), never as HTML.
import {
  $,
  api,
  DECLINE_REASON,
  el,
  endSession,
  errorText,
  field,
  loginFlow,
  money,
  onPress,
  onSubmit,
  PAYMENT_STATUS,
  pagedList,
  pagePath,
  problem,
  session,
  show,
  statusBadge,
  statusLine,
  tabbedPage,
  table,
  when,
} from './common.js';
import { balanceLine, paymentMoney, transactionsView } from './dashboard-money.js';

const TOKEN = 'lipa.dashboard.token';
const root = $('#app');
let token = session.get(TOKEN);
let me = null;
let categories = null;
/** The balance line above the tabs, once signed in. */
let balance = null;

/** An API call with the session token; a 401 signs out. */
async function call(method, path, body) {
  const reply = await api(method, path, { token, body });
  if (reply.status === 401 && token) signOut('Your session has ended. Sign in again.');
  return reply;
}

function signOut(message, kind = 'error') {
  token = null;
  me = null;
  session.clear(TOKEN);
  signInView(message, kind);
}

function signInView(message, kind = 'error') {
  const form = el('div');
  root.replaceChildren(
    el('h1', { text: 'Merchant dashboard' }),
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'signin-title' },
      el('h2', { id: 'signin-title', text: 'Sign in' }),
      el('p', { class: 'muted', text: 'Your merchant email and password, then the one-time code we email you.' }),
      message ? el('p', { class: kind, role: kind === 'error' ? 'alert' : 'status', text: message }) : null,
      form,
    ),
  );
  loginFlow({
    form,
    loginLabel: 'Email',
    passwordLabel: 'Password',
    onToken: (value) => {
      token = value;
      session.set(TOKEN, value);
      void start();
    },
  });
}

async function start() {
  const reply = await call('GET', '/api/v1/me');
  if (reply.status === 401) return; // call() has signed out
  // The network or the service failing is no reason to sign out: the session still holds.
  if (reply.status === 0 || reply.status >= 500) {
    const retry = el('button', { type: 'button', text: 'Try again', onclick: () => void start() });
    root.replaceChildren(
      el('h1', { text: 'Merchant dashboard' }),
      el('p', { class: 'error', role: 'alert', text: errorText(reply) }),
      retry,
    );
    return retry.focus();
  }
  if (reply.status !== 200) return signOut(errorText(reply));
  if (reply.body.type !== 'merchant') {
    // The page forgets the token; it is ended on the server too, so no copy of it lives on.
    void endSession(token);
    return signOut('That is a wallet account. Payers use /wallet.');
  }
  me = reply.body;
  balance = balanceLine(call);
  void balance.refresh();
  tabbedPage({
    root,
    title: 'Merchant dashboard',
    label: 'Dashboard sections',
    items: [
      { id: 'pos', title: 'Points of sale' },
      { id: 'signing-keys', title: 'Signing keys' },
      { id: 'messaging-keys', title: 'Messaging keys' },
      { id: 'payments', title: 'Payments' },
      { id: 'transactions', title: 'Transactions' },
      { id: 'messages', title: 'Messages' },
    ],
    views: VIEWS,
    summary: balance.node,
    storageKey: 'lipa.dashboard.tab',
    actions: el(
      'p',
      {},
      el('span', { class: 'muted', text: `${me.name} · ${me.login} ` }),
      el('button', {
        type: 'button',
        class: 'secondary',
        text: 'Sign out',
        onclick: () => {
          void endSession(token);
          signOut('You signed out.', 'notice');
        },
      }),
    ),
  });
}

// ---------------------------------------------------------------------------------------
// Points of sale

async function loadCategories() {
  if (categories) return categories;
  const reply = await api('GET', '/api/v1/categories');
  // Kept only when read: a failure is tried again the next time the tab opens.
  if (reply.status !== 200) return [];
  categories = reply.body;
  return categories;
}

async function posView(panel) {
  const list = el('div', { 'aria-busy': 'true' }, el('p', { class: 'muted', text: 'Loading…' }));
  const formStatus = statusLine();
  const cats = await loadCategories();
  const names = new Map(cats.map((c) => [c.categoryId, `${c.mcc} · ${c.name}`]));
  if (cats.length === 0) show(formStatus, 'The categories could not be loaded; open this tab again to retry.');

  const input = (id, props = {}) => el('input', { id, name: id, required: true, ...props });
  const inputs = {
    terminalId: input('terminalId', { maxlength: '64', pattern: '[A-Za-z0-9._\\-]{1,64}', 'aria-describedby': 'terminalId-hint' }),
    posCompanyName: input('posCompanyName', { maxlength: '100', autocomplete: 'organization' }),
    description: el('textarea', { id: 'description', name: 'description', maxlength: '500', rows: '3' }),
    categoryId: el(
      'select',
      { id: 'categoryId', name: 'categoryId', required: true },
      el('option', { value: '', text: 'Choose a category…' }),
      cats.map((c) => el('option', { value: c.categoryId, text: `${c.mcc} · ${c.name}` })),
    ),
    website: input('website', { type: 'url', maxlength: '2048', placeholder: 'https://shop.example' }),
    resultUrl: input('resultUrl', { type: 'url', maxlength: '2048', 'aria-describedby': 'resultUrl-hint' }),
    serverUrl: input('serverUrl', { type: 'url', maxlength: '2048', 'aria-describedby': 'serverUrl-hint' }),
    trustAllCertificates: el('input', { id: 'trustAllCertificates', name: 'trustAllCertificates', type: 'checkbox' }),
    merchantId: el('input', { id: 'merchantId', name: 'merchantId', readonly: true, value: me.id, 'aria-describedby': 'merchantId-hint' }),
  };
  const form = el(
    'form',
    { 'aria-labelledby': 'pos-new' },
    el('h3', { id: 'pos-new', text: 'New point of sale' }),
    field('terminalId', 'Terminal ID', inputs.terminalId, 'Letters, digits, dot, dash or underscore; unique across Lipa.'),
    field('posCompanyName', 'Company name', inputs.posCompanyName),
    field('description', 'Description', inputs.description),
    field('categoryId', 'Category', inputs.categoryId),
    field('website', 'Website', inputs.website),
    field('resultUrl', 'Result URL', inputs.resultUrl, 'Receives the signed payment callbacks.'),
    field('serverUrl', 'Server URL', inputs.serverUrl, 'Your server API address; stored and shown.'),
    el(
      'div',
      { class: 'check' },
      inputs.trustAllCertificates,
      el('label', { for: 'trustAllCertificates', text: 'Trust all certificates on callbacks (self-signed TLS)' }),
    ),
    field('merchantId', 'Merchant ID', inputs.merchantId, 'Yours, filled in for you.'),
    el('div', {}, el('button', { type: 'submit', text: 'Create point of sale' })),
    formStatus,
  );
  onSubmit(form, async () => {
    const body = {
      terminalId: inputs.terminalId.value.trim(),
      posCompanyName: inputs.posCompanyName.value,
      description: inputs.description.value,
      categoryId: inputs.categoryId.value,
      website: inputs.website.value.trim(),
      resultUrl: inputs.resultUrl.value.trim(),
      serverUrl: inputs.serverUrl.value.trim(),
      trustAllCertificates: inputs.trustAllCertificates.checked,
      merchantId: me.id,
    };
    const reply = await call('POST', '/api/v1/points-of-sale', body);
    if (reply.status !== 201) return show(formStatus, problem(reply, form));
    form.reset();
    inputs.merchantId.value = me.id;
    show(formStatus, `Point of sale ${reply.body.terminalId} created.`, 'notice');
    await refresh();
  });

  async function refresh() {
    const reply = await call('GET', '/api/v1/points-of-sale');
    list.removeAttribute('aria-busy');
    if (reply.status !== 200) return list.replaceChildren(el('p', { class: 'error', text: errorText(reply) }));
    list.replaceChildren(
      table({
        caption: 'Your points of sale',
        empty: 'No points of sale yet. Create one below.',
        rows: reply.body,
        columns: [
          { title: 'Terminal', cell: (p) => p.terminalId },
          { title: 'Company', cell: (p) => el('span', {}, el('strong', { text: p.posCompanyName }), el('br'), p.description) },
          { title: 'Category', cell: (p) => names.get(p.categoryId) ?? p.categoryId },
          {
            title: 'URLs',
            cell: (p) =>
              el(
                'span',
                {},
                `Website: ${p.website}`,
                el('br'),
                `Result: ${p.resultUrl}`,
                el('br'),
                `Server: ${p.serverUrl}`,
                p.trustAllCertificates ? el('br') : null,
                p.trustAllCertificates ? 'Trusts all certificates' : null,
              ),
          },
          { title: 'Created', cell: (p) => when(p.createdAt) },
        ],
      }),
    );
  }

  panel.replaceChildren(el('h2', { text: 'Points of sale' }), list, el('div', { class: 'card' }, form));
  await refresh();
}

// ---------------------------------------------------------------------------------------
// Signing keys and messaging keys

function keysView({ title, path, intro, idOf, secretOf, secretLabel, extraColumns = [] }) {
  return async (panel) => {
    const list = el('div', {}, el('p', { class: 'muted', text: 'Loading…' }));
    const listStatus = statusLine();
    listStatus.tabIndex = -1;
    const created = el('div');
    const nameInput = el('input', { id: 'key-name', name: 'name', maxlength: '100', 'aria-describedby': 'key-name-hint' });
    const formStatus = statusLine();
    const form = el(
      'form',
      { 'aria-labelledby': 'key-new' },
      el('h3', { id: 'key-new', text: `New ${title.toLowerCase().replace(/s$/, '')}` }),
      field('key-name', 'Name (optional)', nameInput, 'To tell your keys apart, e.g. "web shop".'),
      el('div', {}, el('button', { type: 'submit', text: 'Create key' })),
      formStatus,
    );
    onSubmit(form, async () => {
      const name = nameInput.value.trim();
      const reply = await call('POST', path, name ? { name } : {});
      if (reply.status !== 201) return show(formStatus, problem(reply));
      form.reset();
      show(formStatus, '');
      showSecret(created, { id: idOf(reply.body), secret: secretOf(reply.body), secretLabel });
      await refresh();
    });

    async function revoke(key) {
      const id = idOf(key);
      if (
        !window.confirm(`Revoke ${id}${key.name ? ` (${key.name})` : ''}? Requests made with it will be refused. This cannot be undone.`)
      ) {
        return;
      }
      const reply = await call('DELETE', `${path}/${encodeURIComponent(id)}`);
      if (reply.status !== 204) return show(listStatus, errorText(reply));
      await refresh();
      // The button pressed is gone with the rebuilt list: the focus goes to what happened.
      show(listStatus, `${id} revoked.`, 'notice');
      listStatus.focus();
    }

    async function refresh() {
      const reply = await call('GET', path);
      if (reply.status !== 200) return list.replaceChildren(el('p', { class: 'error', text: errorText(reply) }));
      list.replaceChildren(
        table({
          caption: title,
          empty: 'No keys yet.',
          rows: reply.body,
          columns: [
            { title: 'ID', cell: (k) => idOf(k) },
            { title: 'Name', cell: (k) => k.name ?? '—' },
            ...extraColumns,
            { title: 'Created', cell: (k) => when(k.createdAt) },
            {
              title: 'Status',
              cell: (k) =>
                k.revokedAt
                  ? `Revoked ${when(k.revokedAt)}`
                  : el(
                      'span',
                      {},
                      'Active ',
                      onPress(el('button', { type: 'button', class: 'danger', text: 'Revoke', 'aria-label': `Revoke ${idOf(k)}` }), () =>
                        revoke(k),
                      ),
                    ),
            },
          ],
        }),
      );
    }

    panel.replaceChildren(
      el('h2', { text: title }),
      el('p', { class: 'muted', text: intro }),
      created,
      list,
      listStatus,
      el('div', { class: 'card' }, form),
    );
    await refresh();
  };
}

/** The new key's secret, shown once, with a Copy button. */
function showSecret(container, { id, secret, secretLabel }) {
  const copyStatus = statusLine();
  const code = el('code', { class: 'secret', id: 'new-secret', text: secret });
  const heading = el('h3', { tabindex: '-1', text: `${id} created` });
  const box = el(
    'div',
    { class: 'card', role: 'region', 'aria-label': 'New key' },
    heading,
    el('p', { class: 'error', text: `Copy the ${secretLabel} now: it is shown this once and cannot be shown again.` }),
    el('p', {}, el('strong', { text: `${secretLabel}: ` }), code),
    el(
      'div',
      {},
      el('button', {
        type: 'button',
        text: `Copy ${secretLabel}`,
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(secret);
            show(copyStatus, 'Copied to the clipboard.', 'notice');
          } catch {
            window.getSelection()?.selectAllChildren(code);
            show(copyStatus, 'Copying is not allowed here; the text is selected, copy it by hand.');
          }
        },
      }),
      el('button', { type: 'button', class: 'secondary', text: 'I have stored it', onclick: () => container.replaceChildren() }),
    ),
    copyStatus,
  );
  container.replaceChildren(box);
  heading.focus();
}

const signingKeysView = keysView({
  title: 'Signing keys',
  path: '/api/v1/api-keys',
  intro: 'Sign payment requests with X-Service-Key-ID and the secret (HMAC-SHA256). The secret is stored encrypted and shown once.',
  idOf: (k) => k.keyId,
  secretOf: (k) => k.secret,
  secretLabel: 'Secret',
});

const messagingKeysView = keysView({
  title: 'Messaging keys',
  path: '/api/v1/messaging-keys',
  intro: 'Send email and SMS with the api_key header. The key is stored hashed and shown once.',
  idOf: (k) => k.id,
  secretOf: (k) => k.apiKey,
  secretLabel: 'API key',
  extraColumns: [{ title: 'Starts with', cell: (k) => el('code', { text: `${k.prefix}…` }) }],
});

// ---------------------------------------------------------------------------------------
// Payments, their callbacks and redelivery

const STATUSES = ['pending', 'no_user', 'paid', 'declined', 'expired'];
/** The statuses a payment can still leave; an open payment's detail reloads itself this often. */
const OPEN_STATUSES = ['pending', 'no_user'];
const FOLLOW_MS = 3000;

async function paymentsView(panel) {
  const statusSelect = el(
    'select',
    { id: 'filter-status', name: 'status' },
    el('option', { value: '', text: 'Any status' }),
    STATUSES.map((s) => el('option', { value: s, text: PAYMENT_STATUS[s] })),
  );
  const orderInput = el('input', { id: 'filter-order', name: 'orderId', type: 'search', maxlength: '128' });
  const listStatus = statusLine();
  const list = el('div');
  const detail = el('div');
  const filters = el(
    'form',
    { role: 'search', 'aria-label': 'Find payments' },
    field('filter-status', 'Status', statusSelect),
    field('filter-order', 'Order ID (exact)', orderInput),
    el(
      'div',
      {},
      el('button', { type: 'submit', text: 'Search' }),
      el('button', { type: 'button', class: 'secondary', text: 'Refresh', onclick: () => refresh() }),
    ),
  );
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    void refresh();
  });
  statusSelect.addEventListener('change', () => void refresh());

  /** The filters of the search shown: its later pages are read with them. */
  let searched = {};
  const readPayments = pagedList({
    read: (cursor) => call('GET', pagePath('/api/v1/payments', searched, cursor)),
    fail: (reply) => show(listStatus, problem(reply)),
    draw: (rows, more) => {
      const count = `${rows.length} payment${rows.length === 1 ? '' : 's'}`;
      show(listStatus, more ? `${count} so far; More reads the next ones.` : `${count}.`, 'muted');
      list.replaceChildren(
        table({
          caption: 'Payments, newest first',
          empty: 'No payments match.',
          rows,
          columns: [
            { title: 'Created', cell: (p) => when(p.createdAt) },
            {
              title: 'Order',
              cell: (p) =>
                el('button', {
                  type: 'button',
                  class: 'secondary',
                  text: p.orderId,
                  'aria-label': `Details of order ${p.orderId}`,
                  'data-payment': p.paymentIdentifier,
                  onclick: () => openPayment(p),
                }),
            },
            { title: 'Terminal', cell: (p) => p.terminalId },
            { title: 'Amount', cell: (p) => money(p.amount, p.currency) },
            {
              title: 'Status',
              cell: (p) =>
                el(
                  'span',
                  {},
                  statusBadge(p.status, PAYMENT_STATUS),
                  p.refundedAmount > 0
                    ? [el('br'), el('span', { class: 'muted', text: `Refunded ${money(p.refundedAmount, p.currency)}` })]
                    : null,
                ),
            },
          ],
        }),
        more ?? '',
      );
    },
  });
  async function refresh() {
    searched = {};
    if (statusSelect.value) searched.status = statusSelect.value;
    if (orderInput.value.trim()) searched.orderId = orderInput.value.trim();
    await readPayments();
  }

  async function openPayment(payment) {
    list.hidden = true;
    filters.hidden = true;
    listStatus.hidden = true;
    const heading = el('h3', { tabindex: '-1', text: `Payment for order ${payment.orderId}` });
    const fields = el('div', {}, paymentFields(payment));
    const callbacks = el('div', {}, el('p', { class: 'muted', text: 'Loading callbacks…' }));
    const detailStatus = statusLine();
    let shown = payment;
    const open = () => detail.contains(heading);
    /** Reads the payment again; its fields and callbacks are redrawn when it changed, or always when asked. */
    /** Bumped by every reload: an answer to an earlier one that comes late is dropped. */
    let reloads = 0;
    const reload = async ({ always }) => {
      const asked = ++reloads;
      // One payment per terminal at most has the order id: the first page holds them all.
      const query = new URLSearchParams({ orderId: shown.orderId, limit: '500' });
      const reply = await call('GET', `/api/v1/payments?${query}`);
      if (!open() || asked !== reloads) return;
      if (reply.status !== 200) return show(detailStatus, errorText(reply));
      show(detailStatus, '', '');
      const fresh = reply.body.data.find((p) => p.paymentIdentifier === shown.paymentIdentifier) ?? shown;
      // A refund changes neither the status nor updatedAt: its refundedAmount says it.
      const changed = fresh.status !== shown.status || fresh.updatedAt !== shown.updatedAt || fresh.refundedAmount !== shown.refundedAmount;
      shown = fresh;
      if (changed) {
        fields.replaceChildren(paymentFields(fresh));
        moneyPart.update(fresh);
      }
      if (changed || always) await loadCallbacks(fresh, callbacks);
    };
    // While the payer may still answer, the detail follows the payment by itself.
    // Refunds of a paid payment, or cancelling a pending one; either moves the payment and the balance.
    const moneyPart = paymentMoney({
      call,
      payment,
      changed: () => Promise.all([reload({ always: true }), balance.refresh()]),
    });
    const following = setInterval(() => {
      if (!open() || !OPEN_STATUSES.includes(shown.status)) return clearInterval(following);
      void reload({ always: false });
    }, FOLLOW_MS);
    const back = async () => {
      clearInterval(following);
      detail.replaceChildren();
      list.hidden = false;
      filters.hidden = false;
      listStatus.hidden = false;
      await refresh();
      // Back where the merchant left the list: on the payment just looked at.
      const opened = [...list.querySelectorAll('button')].find((b) => b.dataset.payment === payment.paymentIdentifier);
      (opened ?? statusSelect).focus();
    };
    detail.replaceChildren(
      el(
        'div',
        { class: 'card' },
        heading,
        fields,
        moneyPart.node,
        el('h4', { text: 'Callbacks' }),
        callbacks,
        el(
          'div',
          {},
          el('button', { type: 'button', class: 'secondary', text: 'Back to payments', onclick: back }),
          onPress(el('button', { type: 'button', class: 'secondary', text: 'Refresh' }), () => reload({ always: true })),
        ),
        detailStatus,
      ),
    );
    heading.focus();
    await loadCallbacks(payment, callbacks);
  }

  panel.replaceChildren(el('h2', { text: 'Payments' }), filters, listStatus, list, detail);
  await refresh();
}

function paymentFields(p) {
  const rows = [
    ['Payment ID', p.paymentIdentifier],
    ['Status', el('span', {}, statusBadge(p.status, PAYMENT_STATUS), p.reason ? `: ${DECLINE_REASON[p.reason] ?? p.reason}` : '')],
    ['Amount', money(p.amount, p.currency)],
    p.status === 'paid' ? ['Refunded', money(p.refundedAmount ?? 0, p.currency)] : null,
    ['Order ID', p.orderId],
    ['Terminal', p.terminalId],
    ['Merchant stika', p.merchantStika ?? '—'],
    ['Description', p.description ?? '—'],
    ['Created', when(p.createdAt)],
    ['Updated', when(p.updatedAt)],
    OPEN_STATUSES.includes(p.status) ? ['Expires', when(p.expiresAt)] : null,
    ['Payment page', /^https?:\/\//.test(p.paymentUrl) ? el('a', { href: p.paymentUrl, text: p.paymentUrl }) : p.paymentUrl],
  ];
  return el(
    'dl',
    { class: 'fields' },
    rows.filter(Boolean).flatMap(([term, value]) => [el('dt', { text: term }), el('dd', {}, value)]),
  );
}

/** The payment's callback events; `after` names the event just redelivered, which keeps the focus and says so. */
async function loadCallbacks(payment, container, after = null) {
  const reply = await call('GET', `/api/v1/callbacks?paymentIdentifier=${encodeURIComponent(payment.paymentIdentifier)}`);
  if (reply.status !== 200) return container.replaceChildren(el('p', { class: 'error', text: errorText(reply) }));
  // A payment has one event per change of its status, a handful: the first page holds them.
  const events = reply.body.data;
  if (events.length === 0) {
    return container.replaceChildren(
      el('p', { class: 'muted', text: 'No callbacks yet: one is sent on every status change after creation.' }),
    );
  }
  container.replaceChildren(
    ...events.map((event) => {
      const eventStatus = statusLine();
      return el(
        'section',
        { class: 'card', 'aria-label': `Callback event ${event.eventId}` },
        el(
          'p',
          {},
          el('strong', { text: event.eventId }),
          ` · ${event.eventType} · ${when(event.occurredAt)} · status `,
          statusBadge(event.body?.payment?.status ?? '?', PAYMENT_STATUS),
        ),
        ...event.deliveries.map((d) =>
          el(
            'div',
            {},
            el('p', {}, el('code', { text: d.url }), ' ', statusBadge(d.status), ` ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}`),
            d.nextAttemptAt ? el('p', { class: 'muted', text: `Next attempt ${when(d.nextAttemptAt)}` }) : null,
            d.lastError ? el('p', { class: 'error', text: `Last error: ${d.lastError}` }) : null,
            table({
              caption: `Attempts to ${d.url}`,
              empty: 'Not tried yet.',
              rows: d.history,
              columns: [
                { title: 'When', cell: (a) => when(a.attemptedAt) },
                { title: 'HTTP status', cell: (a) => (a.statusCode === null ? '—' : String(a.statusCode)) },
                { title: 'Error', cell: (a) => a.error ?? '—' },
                { title: 'Time', cell: (a) => `${a.durationMs} ms` },
              ],
            }),
          ),
        ),
        onPress(el('button', { type: 'button', text: 'Redeliver', 'aria-label': `Redeliver ${event.eventId}` }), async () => {
          const answer = await call('POST', `/api/v1/callbacks/${encodeURIComponent(event.eventId)}/redeliver`);
          if (answer.status !== 202) return show(eventStatus, errorText(answer));
          show(eventStatus, 'Sent again; refreshing…', 'notice');
          await new Promise((resolve) => setTimeout(resolve, 1500));
          await loadCallbacks(payment, container, event.eventId);
        }),
        eventStatus,
      );
    }),
  );
  if (after !== null) {
    // The list was rebuilt under the merchant's focus: put it back on the same event's button.
    const section = [...container.children].find((s) => s.getAttribute('aria-label') === `Callback event ${after}`);
    const status = section?.querySelector('[role="status"]');
    if (status) show(status, 'Sent again.', 'notice');
    section?.querySelector('button')?.focus();
  }
}

// ---------------------------------------------------------------------------------------
// Messages sent through the messaging API

async function messagesView(panel) {
  const list = el('div', {}, el('p', { class: 'muted', text: 'Loading…' }));
  const refresh = pagedList({
    read: (cursor) => call('GET', pagePath('/api/v1/messages', {}, cursor)),
    fail: (reply) => list.replaceChildren(el('p', { class: 'error', text: errorText(reply) })),
    draw: (rows, more) =>
      list.replaceChildren(
        table({
          caption: 'Messages you sent, newest first',
          empty: 'No messages yet. Send one with a messaging key: POST /api/messages.',
          rows,
          columns: [
            { title: 'Sent', cell: (m) => when(m.created_at) },
            { title: 'Type', cell: (m) => el('span', { class: 'nowrap', text: m.type }) },
            { title: 'To', cell: (m) => (m.type === 'sms' ? `+${m.phone?.country_code ?? ''} ${m.phone?.number ?? ''}` : m.email) },
            {
              title: 'Content',
              cell: (m) =>
                el(
                  'details',
                  {},
                  el('summary', {
                    text:
                      m.type === 'email' ? (m.subject ?? '(no subject)') : `${m.content.slice(0, 40)}${m.content.length > 40 ? '…' : ''}`,
                  }),
                  el('div', { class: 'content', text: m.content }),
                  m.content_type ? el('p', { class: 'hint', text: `content_type: ${m.content_type}` }) : null,
                ),
            },
            {
              title: 'Status',
              cell: (m) => el('span', {}, statusBadge(m.status), m.error ? [el('br'), el('span', { class: 'hint', text: m.error })] : null),
            },
          ],
        }),
        more ?? '',
      ),
  });
  panel.replaceChildren(
    el(
      'div',
      { class: 'bar' },
      el('h2', { text: 'Messages' }),
      el('button', { type: 'button', class: 'secondary', text: 'Refresh', onclick: () => refresh() }),
    ),
    list,
  );
  await refresh();
}

const VIEWS = {
  pos: posView,
  'signing-keys': signingKeysView,
  'messaging-keys': messagingKeysView,
  payments: paymentsView,
  transactions: transactionsView({
    call,
    token: () => token,
    signOut,
    balance: { refresh: () => balance?.refresh() },
  }),
  messages: messagesView,
};

if (token) void start();
else signInView();
