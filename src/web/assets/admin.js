// The operator console (/admin). The ADMIN_TOKEN is typed in by the operator, kept in
// sessionStorage (this tab only) and sent as a Bearer header; it is never part of the page.
// Every user-supplied string (names, logins, message content) goes in through textContent.
import {
  $,
  api,
  el,
  errorText,
  field,
  money,
  onPress,
  onSubmit,
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

const TOKEN = 'lipa.admin.token';
const OUTBOX_PAUSED = 'lipa.admin.outboxPaused';
const root = $('#app');
const production = document.body.dataset.env === 'production';
let token = session.get(TOKEN);
let outboxTimer = null;

async function call(method, path, body) {
  const reply = await api(method, path, { token, body });
  if (reply.status === 401 && token) forget('The ADMIN_TOKEN was refused. Enter it again.');
  return reply;
}

function stopOutbox() {
  if (outboxTimer !== null) clearInterval(outboxTimer);
  outboxTimer = null;
}

function forget(message, kind = 'error') {
  stopOutbox();
  token = null;
  session.clear(TOKEN);
  tokenView(message, kind);
}

function tokenView(message, kind = 'error') {
  const input = el('input', {
    id: 'admin-token',
    name: 'adminToken',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'admin-token-hint',
  });
  const formStatus = statusLine();
  const form = el(
    'form',
    {},
    field(
      'admin-token',
      'ADMIN_TOKEN',
      input,
      production
        ? 'This console needs the ADMIN_TOKEN of this deployment.'
        : 'Staging prints a generated ADMIN_TOKEN at start unless one is set in the environment.',
    ),
    el('div', {}, el('button', { type: 'submit', text: 'Open the console' })),
    formStatus,
  );
  onSubmit(form, async () => {
    const candidate = input.value.trim();
    const reply = await api('GET', '/api/v1/admin/merchants?limit=1', { token: candidate });
    if (reply.status === 401) return show(formStatus, 'That token was refused.');
    if (reply.status !== 200) return show(formStatus, errorText(reply));
    token = candidate;
    session.set(TOKEN, candidate);
    consoleView();
  });
  root.replaceChildren(
    el('h1', { text: 'Operator console' }),
    el(
      'section',
      { class: 'card', 'aria-labelledby': 'token-title' },
      el('h2', { id: 'token-title', text: 'Operator sign-in' }),
      message ? el('p', { class: kind, role: kind === 'error' ? 'alert' : 'status', text: message }) : null,
      form,
    ),
  );
  input.focus();
}

function consoleView() {
  tabbedPage({
    root,
    title: 'Operator console',
    label: 'Console sections',
    items: [
      { id: 'merchants', title: 'Merchants' },
      { id: 'payers', title: 'Payers' },
      { id: 'outbox', title: 'Outbox' },
    ],
    views: VIEWS,
    storageKey: 'lipa.admin.tab',
    onLeave: stopOutbox,
    actions: el('button', {
      type: 'button',
      class: 'secondary',
      text: 'Forget the token',
      onclick: () => forget('The token is forgotten in this tab.', 'notice'),
    }),
  });
}

// ---------------------------------------------------------------------------------------
// Merchants

async function merchantsView(view) {
  const list = el('div', {}, el('p', { class: 'muted', text: 'Loading…' }));
  const inputs = {
    login: el('input', { id: 'm-login', name: 'login', type: 'email', required: true, maxlength: '254', autocomplete: 'off' }),
    password: el('input', {
      id: 'm-password',
      name: 'password',
      type: 'password',
      required: true,
      minlength: '8',
      maxlength: '256',
      autocomplete: 'new-password',
    }),
    name: el('input', { id: 'm-name', name: 'name', required: true, maxlength: '200' }),
  };
  const formStatus = statusLine();
  const form = el(
    'form',
    { 'aria-labelledby': 'm-new' },
    el('h3', { id: 'm-new', text: 'New merchant' }),
    field('m-login', 'Login (email)', inputs.login),
    field('m-password', 'Password', inputs.password, 'At least 8 characters.'),
    field('m-name', 'Name', inputs.name),
    el('div', {}, el('button', { type: 'submit', text: 'Create merchant' })),
    formStatus,
  );
  onSubmit(form, async () => {
    const reply = await call('POST', '/api/v1/admin/merchants', {
      login: inputs.login.value.trim(),
      password: inputs.password.value,
      name: inputs.name.value.trim(),
    });
    if (reply.status !== 201) return show(formStatus, problem(reply, form, 'm-'));
    form.reset();
    show(formStatus, `Merchant ${reply.body.login} created.`, 'notice');
    await refresh();
  });

  const refresh = pagedList({
    read: (cursor) => call('GET', pagePath('/api/v1/admin/merchants', {}, cursor)),
    fail: (reply) => list.replaceChildren(el('p', { class: 'error', text: errorText(reply) })),
    draw: (rows, more) =>
      list.replaceChildren(
        table({
          caption: 'Merchants, newest first',
          empty: 'No merchants yet.',
          rows,
          columns: [
            { title: 'Name', cell: (m) => m.name },
            { title: 'Login', cell: (m) => m.login },
            { title: 'Merchant ID', cell: (m) => el('code', { text: m.merchantId }) },
            { title: 'Created', cell: (m) => when(m.createdAt) },
            {
              title: 'Standing',
              cell: (m) =>
                el(
                  'span',
                  {},
                  m.suspendedAt ? `Suspended ${when(m.suspendedAt)} ` : 'Active ',
                  onPress(
                    el('button', {
                      type: 'button',
                      class: m.suspendedAt ? 'secondary' : 'danger',
                      text: m.suspendedAt ? 'Reinstate' : 'Suspend',
                      'aria-label': `${m.suspendedAt ? 'Reinstate' : 'Suspend'} ${m.login}`,
                    }),
                    () => setStanding(m, m.suspendedAt ? 'reinstate' : 'suspend'),
                  ),
                ),
            },
          ],
        }),
        more ?? '',
      ),
  });

  /** Suspends (after a confirmation: it revokes the merchant's keys) or reinstates a merchant. */
  async function setStanding(merchant, action) {
    if (
      action === 'suspend' &&
      !window.confirm(
        `Suspend ${merchant.login}? Its signing and messaging keys are revoked and its sessions ended; it cannot sign in until reinstated, and makes new keys then.`,
      )
    ) {
      return;
    }
    const reply = await call('POST', `/api/v1/admin/merchants/${encodeURIComponent(merchant.merchantId)}/${action}`);
    if (reply.status !== 200) return show(listStatus, errorText(reply));
    await refresh();
    show(listStatus, `${merchant.login} ${action === 'suspend' ? 'suspended' : 'reinstated'}.`, 'notice');
    listStatus.focus();
  }

  const listStatus = statusLine();
  listStatus.tabIndex = -1;
  view.replaceChildren(el('h2', { text: 'Merchants' }), el('div', { class: 'card' }, form), list, listStatus);
  await refresh();
}

// ---------------------------------------------------------------------------------------
// Payers and deposits

async function payersView(view) {
  const list = el('div', {}, el('p', { class: 'muted', text: 'Loading…' }));
  const p = {
    phone: el('input', {
      id: 'p-phone',
      name: 'phone',
      required: true,
      inputmode: 'numeric',
      pattern: '[0-9]{8,15}',
      'aria-describedby': 'p-phone-hint',
    }),
    name: el('input', { id: 'p-name', name: 'name', required: true, maxlength: '200' }),
    pin: el('input', {
      id: 'p-pin',
      name: 'pin',
      type: 'password',
      required: true,
      inputmode: 'numeric',
      pattern: '[0-9]{4,6}',
      autocomplete: 'new-password',
      'aria-describedby': 'p-pin-hint',
    }),
    balance: el('input', { id: 'p-balance', name: 'balance', type: 'number', min: '0', step: '0.01', inputmode: 'decimal' }),
  };
  const createStatus = statusLine();
  const createForm = el(
    'form',
    { 'aria-labelledby': 'p-new' },
    el('h3', { id: 'p-new', text: 'New payer (wallet)' }),
    field('p-phone', 'Phone', p.phone, 'Digits with country code, no plus: 254712345678.'),
    field('p-name', 'Name', p.name),
    field('p-pin', 'Wallet PIN', p.pin, '4 to 6 digits.'),
    field('p-balance', 'Starting balance (KES, optional)', p.balance),
    el('div', {}, el('button', { type: 'submit', text: 'Create payer' })),
    createStatus,
  );
  onSubmit(createForm, async () => {
    const body = { phone: p.phone.value.trim(), name: p.name.value.trim(), pin: p.pin.value };
    if (p.balance.value !== '') body.balance = Number(p.balance.value);
    const reply = await call('POST', '/api/v1/admin/payers', body);
    if (reply.status !== 201) return show(createStatus, problem(reply, createForm, 'p-'));
    createForm.reset();
    show(createStatus, `Wallet ${reply.body.phone} created with ${money(reply.body.balance)}.`, 'notice');
    await refresh();
  });

  const d = {
    phone: el('input', { id: 'd-phone', name: 'phone', required: true, inputmode: 'numeric', pattern: '[0-9]{8,15}' }),
    amount: el('input', {
      id: 'd-amount',
      name: 'amount',
      type: 'number',
      required: true,
      min: '0.01',
      step: '0.01',
      inputmode: 'decimal',
    }),
  };
  const depositStatus = statusLine();
  const depositForm = el(
    'form',
    { 'aria-labelledby': 'd-new' },
    el('h3', { id: 'd-new', text: 'Deposit (cash-in)' }),
    field('d-phone', 'Phone', d.phone),
    field('d-amount', 'Amount (KES)', d.amount),
    el('div', {}, el('button', { type: 'submit', text: 'Deposit' })),
    depositStatus,
  );
  onSubmit(depositForm, async () => {
    const phone = d.phone.value.trim();
    const reply = await call('POST', `/api/v1/admin/payers/${encodeURIComponent(phone)}/deposits`, { amount: Number(d.amount.value) });
    if (reply.status === 0) {
      // It may have been made: sending it again could deposit twice. The list says.
      show(depositStatus, `No answer came: the deposit may or may not have been made. Check ${phone}'s balance below before trying again.`);
      return refresh();
    }
    if (reply.status !== 200) return show(depositStatus, problem(reply, depositForm, 'd-'));
    depositForm.reset();
    show(depositStatus, `${reply.body.phone} now has ${money(reply.body.balance)}.`, 'notice');
    await refresh();
  });

  const refresh = pagedList({
    read: (cursor) => call('GET', pagePath('/api/v1/admin/payers', {}, cursor)),
    fail: (reply) => list.replaceChildren(el('p', { class: 'error', text: errorText(reply) })),
    draw: (rows, more) =>
      list.replaceChildren(
        table({
          caption: 'Payers, newest first',
          empty: 'No payers yet.',
          rows,
          columns: [
            { title: 'Name', cell: (x) => x.name },
            { title: 'Phone', cell: (x) => x.phone },
            { title: 'Balance', cell: (x) => money(x.balance, x.currency) },
            { title: 'Created', cell: (x) => when(x.createdAt) },
            {
              title: 'Cash-in',
              cell: (x) =>
                el('button', {
                  type: 'button',
                  class: 'secondary',
                  text: 'Deposit',
                  'aria-label': `Deposit to ${x.phone}`,
                  onclick: () => {
                    d.phone.value = x.phone;
                    d.amount.focus();
                  },
                }),
            },
          ],
        }),
        more ?? '',
      ),
  });

  view.replaceChildren(
    el('h2', { text: 'Payers' }),
    el('div', { class: 'card' }, depositForm),
    el('div', { class: 'card' }, createForm),
    list,
  );
  await refresh();
}

// ---------------------------------------------------------------------------------------
// The embedded outbox: what would have been sent (OTPs, payment prompts, merchant messages)

async function outboxView(view) {
  const list = el('div', {}, el('p', { class: 'muted', text: 'Loading…' }));
  const updated = el('p', { class: 'muted' });
  const toggle = el('button', { type: 'button', class: 'secondary', 'aria-pressed': 'true', text: 'Auto-refresh every 3 s: on' });
  /** The first page as last drawn; '' when anything else is shown (an error, older pages). */
  let last = '';
  /** Older pages are shown: the periodic refresh leaves the reader there; Refresh now starts over. */
  let extended = false;

  const refresh = pagedList({
    read: (cursor) => call('GET', pagePath('/api/v1/admin/outbox', {}, cursor)),
    fail: (reply) => {
      last = ''; // the list shows the error now: the next answer replaces it, changed or not
      list.replaceChildren(el('p', { class: 'error', text: errorText(reply) }));
    },
    draw: (rows, more, first) => {
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      const text = JSON.stringify([rows, more === null]);
      if (first && text === last) return false; // unchanged: keep the reader's place and open details
      last = first ? text : '';
      extended = !first;
      list.replaceChildren(
        table({
          caption: 'Outbox, newest first',
          empty: 'Nothing sent yet.',
          rows,
          columns: [
            { title: 'Time', cell: (m) => when(m.createdAt) },
            { title: 'Type', cell: (m) => `${m.type} · ${m.purpose}` },
            { title: 'To', cell: (m) => m.to },
            {
              title: 'Content',
              cell: (m) =>
                el('div', {}, m.subject ? el('strong', { text: m.subject }) : null, el('div', { class: 'content', text: m.content })),
            },
            { title: 'Status', cell: (m) => statusBadge(m.status) },
          ],
        }),
        more ?? '',
      );
    },
  });

  const startTimer = () => {
    stopOutbox();
    outboxTimer = setInterval(() => {
      if (!document.hidden && !extended) void refresh();
    }, 3000);
  };
  const showToggle = (on) => {
    toggle.setAttribute('aria-pressed', String(on));
    toggle.textContent = `Auto-refresh every 3 s: ${on ? 'on' : 'off'}`;
  };
  // Paused stays paused (for this tab) when the operator looks at another section and comes back.
  const paused = session.get(OUTBOX_PAUSED) === '1';
  showToggle(!paused);
  toggle.addEventListener('click', () => {
    const on = outboxTimer === null;
    if (on) startTimer();
    else stopOutbox();
    if (on) session.clear(OUTBOX_PAUSED);
    else session.set(OUTBOX_PAUSED, '1');
    showToggle(on);
  });

  view.replaceChildren(
    el(
      'div',
      { class: 'bar' },
      el('h2', { text: 'Outbox' }),
      el('div', {}, toggle, el('button', { type: 'button', class: 'secondary', text: 'Refresh now', onclick: () => refresh() })),
    ),
    el('p', {
      class: 'muted',
      text: 'Email and SMS the service would have sent (no SMTP or SMPP configured): login codes, payment prompts, merchant messages.',
    }),
    updated,
    list,
  );
  await refresh();
  if (view.isConnected && !paused) startTimer();
}

const VIEWS = { merchants: merchantsView, payers: payersView, outbox: outboxView };

if (token) consoleView();
else tokenView(production ? 'This console needs the ADMIN_TOKEN.' : undefined, 'notice');
