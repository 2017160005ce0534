// Shared by the pages. Every user-supplied string is put in the page with textContent, never
// as HTML. Tokens live in sessionStorage (this tab only) and travel as a Bearer header, so
// no cookie exists for a cross-site request to ride on (no CSRF surface).

/** What a call that reached nobody resolves to: status 0, and words for the reader. */
const UNREACHABLE = { status: 0, body: { error: { message: 'Cannot reach Lipa. Check your connection and try again.' } } };

/** Calls the JSON API; resolves to {status, body}, status 0 when the network failed. */
export async function api(method, path, { body, token, headers } = {}) {
  const init = { method, headers: { ...(headers ?? {}) } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (token) init.headers.authorization = `Bearer ${token}`;
  let response;
  let text;
  try {
    response = await fetch(path, init);
    text = await response.text();
  } catch {
    return UNREACHABLE;
  }
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed };
}

/** Logs the token out on the server, so that a copy of it stops working too (the page forgets it either way). */
export function endSession(token) {
  return api('DELETE', '/api/v1/authorization', { token }).catch(() => null);
}

/** The message of an API error body, or a fallback; waits in seconds said in words. */
export function errorText(reply, fallback = 'Something went wrong.') {
  return inWords(reply?.body?.error?.message ?? reply?.body?.message ?? fallback);
}

/** "retry in 897 s" → "retry in 15 minutes": the API counts seconds, people count minutes. */
function inWords(message) {
  return String(message).replace(/\b(\d+) s\b/g, (_, digits) => {
    const seconds = Number(digits);
    if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
    const minutes = Math.ceil(seconds / 60);
    return `${minutes} minute${minutes === 1 ? '' : 's'}`;
  });
}

/** Runs `work` on each submit of `form`, one at a time: a double click sends one request. */
export function onSubmit(form, work) {
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void whileBusy(form, work);
  });
}

/** Runs `work` on each click of `button`, one at a time: a double click sends one request. */
export function onPress(button, work) {
  button.addEventListener('click', () => void whileBusy(button, work));
  return button;
}

/**
 * Runs `work` with the buttons of `node` (a form, or one button) disabled, so a double click
 * sends one request. A form's fields marked invalid by the last answer are unmarked: this
 * answer says afresh what is wrong, if anything.
 */
async function whileBusy(node, work) {
  const buttons = node instanceof HTMLButtonElement ? [node] : [...node.querySelectorAll('button')];
  if (node.getAttribute('aria-busy') === 'true') return;
  node.setAttribute('aria-busy', 'true');
  for (const button of buttons) button.disabled = true;
  if (node instanceof HTMLFormElement) for (const input of node.querySelectorAll('[aria-invalid]')) input.removeAttribute('aria-invalid');
  try {
    await work();
  } finally {
    node.removeAttribute('aria-busy');
    for (const button of buttons) button.disabled = false;
  }
}

/** Creates an element with properties, attributes and children (strings become text nodes). */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key in node && typeof value !== 'string') node[key] = value;
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const $ = (selector, root = document) => root.querySelector(selector);

export function show(node, message, kind = 'error') {
  node.textContent = message;
  node.className = kind;
}

export function money(amount, currency = 'KES') {
  return `${currency} ${Number(amount).toLocaleString('en-KE', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

/** A payment's status in words, as the payer and the merchant read it (the API's codes are for code). */
export const PAYMENT_STATUS = {
  pending: 'Waiting for approval',
  no_user: 'No wallet yet',
  paid: 'Paid',
  declined: 'Declined',
  expired: 'Expired',
};

/** Why a payment was declined, in words. */
export const DECLINE_REASON = {
  declined_by_payer: 'declined by the payer',
  insufficient_funds: 'not enough money in the wallet',
  cancelled_by_merchant: 'cancelled by the merchant',
};

/**
 * A status as a badge: in the words of `labels` (PAYMENT_STATUS for payments), else the code
 * with a capital (a callback's "Delivered", a message's "Queued"); its class keeps the code.
 */
export function statusBadge(status, labels = {}) {
  const text = labels[status] ?? `${status.charAt(0).toUpperCase()}${status.slice(1).replaceAll('_', ' ')}`;
  return el('span', { class: `status status-${status}`, text });
}

export const session = {
  get: (name) => sessionStorage.getItem(name),
  set: (name, value) => sessionStorage.setItem(name, value),
  clear: (name) => sessionStorage.removeItem(name),
};

/**
 * A login with password (or PIN) then OTP, through endpoints 1 and 2. Resolves to a token.
 * `wrongCredentials` replaces the API's generic text for a wrong login or password.
 */
export function loginFlow({ form, loginLabel, passwordLabel, passwordType = 'password', wrongCredentials, onToken }) {
  const status = el('p', { role: 'status', 'aria-live': 'polite' });
  const login = el('input', { id: 'login', name: 'login', autocomplete: 'username', required: true });
  const password = el('input', {
    id: 'password',
    name: 'password',
    type: passwordType,
    autocomplete: 'current-password',
    required: true,
    inputmode: passwordType === 'password' ? undefined : 'numeric',
  });
  const otp = el('input', { id: 'otp', name: 'otp', autocomplete: 'one-time-code', inputmode: 'numeric', required: true });
  const step1 = el(
    'form',
    {},
    el('label', { for: 'login', text: loginLabel }),
    login,
    el('label', { for: 'password', text: passwordLabel }),
    password,
    el('div', {}, el('button', { type: 'submit', text: 'Continue' })),
  );
  // A code that is wrong, expired or used up needs a new one: send it, or start again.
  const resend = el('button', { type: 'button', class: 'secondary', text: 'Send a new code' });
  const restart = el('button', { type: 'button', class: 'secondary', text: 'Start again' });
  const step2 = el(
    'form',
    { hidden: true },
    el('label', { for: 'otp', text: 'One-time code' }),
    otp,
    el('div', {}, el('button', { type: 'submit', text: 'Sign in' }), resend, restart),
  );
  const refused = (reply) =>
    show(status, reply.body?.error?.code === 'invalid_credentials' && wrongCredentials ? wrongCredentials : errorText(reply));
  const sendCode = async () => {
    const reply = await api('POST', '/api/v1/authorization', { body: { login: login.value.trim(), password: password.value } });
    if (reply.status === 200) return true;
    refused(reply);
    return false;
  };
  onSubmit(step1, async () => {
    if (!(await sendCode())) return;
    step1.hidden = true;
    step2.hidden = false;
    show(status, 'We sent you a one-time code.', 'notice');
    otp.focus();
  });
  onSubmit(step2, async () => {
    const reply = await api('POST', '/api/v1/authorization/confirm', { body: { login: login.value.trim(), otp: otp.value.trim() } });
    if (reply.status !== 200) return refused(reply);
    onToken(reply.body.token);
  });
  resend.addEventListener('click', () =>
    whileBusy(step2, async () => {
      if (!(await sendCode())) return;
      otp.value = '';
      show(status, 'We sent you a new one-time code; the one before no longer works.', 'notice');
      otp.focus();
    }),
  );
  restart.addEventListener('click', () => {
    otp.value = '';
    step2.hidden = true;
    step1.hidden = false;
    show(status, '', 'notice');
    password.focus();
  });
  form.replaceChildren(step1, step2, status);
  login.focus();
}

const WHEN = {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  timeZoneName: 'short',
};

/** A date-time from the API (ISO 8601) in the reader's locale and time zone, which it names; '—' when absent. */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString(undefined, WHEN) : '—';
}

/**
 * Tabs (WAI-ARIA tabs pattern): a nav of buttons with aria-selected, one tab stop, arrow
 * keys, Home and End move between tabs. `panel` is the one tabpanel the tabs fill.
 */
export function tabs({ label, items, panel, onSelect }) {
  const buttons = items.map((item) =>
    el('button', {
      type: 'button',
      role: 'tab',
      id: `tab-${item.id}`,
      'aria-controls': panel.id,
      'aria-selected': 'false',
      tabindex: '-1',
      text: item.title,
    }),
  );
  const nav = el('nav', { class: 'tabs', role: 'tablist', 'aria-label': label }, buttons);
  panel.setAttribute('role', 'tabpanel');
  panel.setAttribute('tabindex', '0');
  let current = -1;
  const select = (index, focus = false) => {
    buttons.forEach((button, i) => {
      button.setAttribute('aria-selected', String(i === index));
      button.setAttribute('tabindex', i === index ? '0' : '-1');
    });
    panel.setAttribute('aria-labelledby', buttons[index].id);
    if (focus) buttons[index].focus();
    current = index;
    onSelect(items[index].id);
  };
  buttons.forEach((button, i) => {
    button.addEventListener('click', () => select(i));
    button.addEventListener('keydown', (event) => {
      const last = buttons.length - 1;
      const next = { ArrowRight: i === last ? 0 : i + 1, ArrowLeft: i === 0 ? last : i - 1, Home: 0, End: last }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      select(next, true);
    });
  });
  return {
    nav,
    select: (id) =>
      select(
        Math.max(
          0,
          items.findIndex((item) => item.id === id),
        ),
      ),
    current: () => items[current]?.id,
  };
}

/**
 * A table in a keyboard-focusable region; on a narrow screen each row stacks into a card with
 * its column titles (data-label, app.css), explicit roles keeping the table semantics.
 * `columns` are {title, cell(row)} where cell returns text or a Node; text goes in as text only.
 */
/**
 * A page of tabs under a title bar (the dashboard, the operator console). The chosen tab is
 * remembered for this browser tab (`storageKey`), the first is the default, and every visit
 * gets a fresh container: a slow answer for a tab left behind lands nowhere. `onLeave` runs
 * before each switch (to stop a tab's timers). `summary`, if given, shows between the title bar
 * and the tabs, whatever the tab (the dashboard's balance).
 */
export function tabbedPage({ root, title, label, items, views, storageKey, actions, summary, onLeave }) {
  const panel = el('section', { id: 'panel', class: 'panel' });
  const nav = tabs({
    label,
    panel,
    items,
    onSelect: (id) => {
      onLeave?.();
      session.set(storageKey, id);
      const view = el('div');
      panel.replaceChildren(view);
      void views[id](view);
    },
  });
  const heading = el('h1', { text: title, tabindex: '-1' });
  root.replaceChildren(el('div', { class: 'bar' }, heading, actions), summary ?? '', nav.nav, panel);
  nav.select(session.get(storageKey) ?? items[0].id);
  // Signed in: the focus moves from the sign-in form that is gone to the page it opened.
  heading.focus();
}

/**
 * A list the API answers a page at a time ({data, nextCursor}). `read(cursor)` asks for one
 * page (cursor null for the first); `draw(rows, more, first)` shows every row read so far,
 * with `more`, a "More" button that reads the next page (null after the last), and may answer
 * false to keep what is shown (a first page unchanged); `fail(reply)` shows an error. Each
 * call of the returned function starts again from the first page; a late answer to an
 * earlier start, or a More of rows no longer shown, is dropped. It resolves to the first reply.
 */
export function pagedList({ read, draw, fail }) {
  let starts = 0;
  let shown = 0;
  return async function start() {
    const run = ++starts;
    let rows = [];
    const page = async (cursor) => {
      const reply = await read(cursor);
      if (run !== (cursor === null ? starts : shown)) return reply;
      if (reply.status !== 200) {
        fail(reply);
        return reply;
      }
      const next = reply.body.nextCursor;
      const more = next === null ? null : onPress(el('button', { type: 'button', class: 'secondary', text: 'More' }), () => page(next));
      const all = rows.concat(reply.body.data);
      if (draw(all, more, cursor === null) === false) return reply;
      rows = all;
      shown = run;
      // The button pressed went with the old drawing: the focus goes on to the new one.
      if (cursor !== null) more?.focus();
      return reply;
    };
    return page(null);
  };
}

/** `path` with `query` and, given one, the cursor of the page wanted. */
export function pagePath(path, query, cursor) {
  const params = new URLSearchParams(query);
  if (cursor !== null) params.set('cursor', cursor);
  return `${path}?${params}`;
}

export function table({ caption, columns, rows, empty = 'Nothing yet.' }) {
  if (rows.length === 0) return el('p', { class: 'muted', text: empty });
  const head = el(
    'tr',
    { role: 'row' },
    columns.map((c) => el('th', { scope: 'col', role: 'columnheader', text: c.title })),
  );
  const body = rows.map((row) =>
    el(
      'tr',
      { role: 'row' },
      columns.map((c) => el('td', { role: 'cell', 'data-label': c.title }, el('span', {}, c.cell(row) ?? ''))),
    ),
  );
  return el(
    'div',
    { class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: '0' },
    el(
      'table',
      { role: 'table' },
      el('caption', { class: 'visually-hidden', text: caption }),
      el('thead', { role: 'rowgroup' }, head),
      el('tbody', { role: 'rowgroup' }, body),
    ),
  );
}

/**
 * An error answer as text: the message, then each field named in details. Given the form,
 * each field is called by its label, marked aria-invalid, and the first one gets focus (the
 * input of field `f` has the id `${idPrefix}f`).
 */
export function problem(reply, form, idPrefix = '') {
  const details = reply.body?.error?.details ?? [];
  let name = (field) => field;
  if (form) {
    const id = (field) => CSS.escape(`${idPrefix}${field}`);
    for (const input of form.querySelectorAll('[aria-invalid]')) input.removeAttribute('aria-invalid');
    const inputs = details.map((d) => form.querySelector(`#${id(d.field)}`)).filter(Boolean);
    for (const input of inputs) input.setAttribute('aria-invalid', 'true');
    inputs[0]?.focus();
    name = (field) => form.querySelector(`label[for="${id(field)}"]`)?.textContent ?? field;
  }
  const said = (d) => `${name(d.field)} ${d.message}`;
  if (details.length === 0) return errorText(reply);
  return inWords(details.length === 1 ? said(details[0]) : `${said(details[0])} (${details.slice(1).map(said).join('; ')})`);
}

/** A polite live region for the outcome of a form. */
export const statusLine = () => el('p', { role: 'status', 'aria-live': 'polite' });

// When the browser's own check stops a submit (its bubble says why), a message left by the
// last answer would describe another problem: it goes.
document.addEventListener(
  'invalid',
  (event) => {
    for (const line of event.target?.form?.querySelectorAll('p[role=status], p[role=alert]') ?? []) show(line, '', '');
  },
  true,
);

/** A labelled input with an optional hint. */
export const field = (id, label, input, hint) => [
  el('label', { for: id, text: label }),
  input,
  hint ? el('p', { class: 'hint', id: `${id}-hint`, text: hint }) : null,
];
