import { connect } from 'node:net';
import { LipaClient } from '../../src/client/index.js';
import { readText } from '../../src/messaging/login-codes.js';
import { ADMIN_TOKEN, type Lipa, STAGING_OTP } from './harness.js';
import { checkAgainstOpenApi, checkedFetch, parseAnswer } from './openapi-check.js';

export interface Reply {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect arbitrary JSON answers
  body: any;
  text: string;
}

export interface CallOptions {
  body?: unknown;
  /** Sent as-is instead of JSON.stringify(body). */
  raw?: string;
  token?: string;
  headers?: Record<string, string>;
}

/** One HTTP call to the running service; parses JSON answers. */
export async function call(base: string, method: string, path: string, options: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
    headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const response = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await response.text();
  const parsed = parseAnswer(text);
  await checkAgainstOpenApi(base, method, path, response.status, response.headers.get('content-type'), parsed);
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** The merchant client, signing with `key`; its answers are checked against the OpenAPI document as call()'s are. */
export const clientFor = (baseUrl: string, key: { keyId: string; secret: string }): LipaClient =>
  new LipaClient({ fetch: checkedFetch, baseUrl, keyId: key.keyId, secret: key.secret });

export const admin = (lipa: Lipa, method: string, path: string, body?: unknown) =>
  call(lipa.url, method, path, { body, token: ADMIN_TOKEN });

/** Sends raw bytes over one connection; resolves with all the server wrote before it closed it. */
export const sendBytes = (base: string, bytes: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(Number(new URL(base).port), '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString();
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });

let counter = 0;
export const unique = (prefix: string) =>
  `${prefix}${Date.now().toString(36)}${(counter++).toString(36)}${Math.floor(Math.random() * 1e6)}`;

/** A unique Kenyan-looking phone number (digits, country code, no plus). */
export function uniquePhone(): string {
  return `2547${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`;
}

export interface MerchantFixture {
  merchantId: string;
  login: string;
  password: string;
  name: string;
}

export async function createMerchant(lipa: Lipa, overrides: Partial<MerchantFixture> = {}): Promise<MerchantFixture> {
  const input = { login: `${unique('m')}@shop.example`, password: 'correct horse battery', name: 'Duka Bora', ...overrides };
  const reply = await admin(lipa, 'POST', '/api/v1/admin/merchants', { login: input.login, password: input.password, name: input.name });
  if (reply.status !== 201) throw new Error(`merchant fixture failed: ${reply.status} ${reply.text}`);
  return { ...input, merchantId: reply.body.merchantId, login: reply.body.login };
}

export interface PayerFixture {
  payerId: string;
  phone: string;
  pin: string;
}

export async function createPayer(lipa: Lipa, overrides: { phone?: string; pin?: string; balance?: number } = {}): Promise<PayerFixture> {
  const input = {
    phone: overrides.phone ?? uniquePhone(),
    pin: overrides.pin ?? '4321',
    name: 'Achieng',
    balance: overrides.balance ?? 1000,
  };
  const reply = await admin(lipa, 'POST', '/api/v1/admin/payers', input);
  if (reply.status !== 201) throw new Error(`payer fixture failed: ${reply.status} ${reply.text}`);
  return { payerId: reply.body.payerId, phone: input.phone, pin: input.pin };
}

/**
 * The newest OTP the service sent to `to` (email or phone digits), read from the outbox as a
 * staging tester does. Production's outbox hides codes from operators, so there the test
 * reads the stored message, standing in for the recipient's inbox.
 */
export async function lastOtpSentTo(lipa: Lipa, to: string): Promise<string> {
  const reply = await admin(lipa, 'GET', '/api/v1/admin/outbox?limit=200');
  let content = (reply.body.data as Array<{ to: string; purpose: string; content: string }>).find(
    (m) => m.to === to && m.purpose === 'otp',
  )?.content;
  if (content !== undefined && !/[0-9]{6}/.test(content)) {
    const rows = await lipa.ctx.store.db
      .selectFrom('messages')
      .selectAll()
      .where('purpose', '=', 'otp')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    const row = rows.find((m) => (m.type === 'email' ? m.email : `${m.phone_country_code}${m.phone_number}`) === to);
    content = row && readText(lipa.ctx.secretBox, row);
  }
  const otp = content?.match(/\b([0-9]{6})\b/)?.[1];
  if (!otp) throw new Error(`no OTP in the outbox for ${to}`);
  return otp;
}

/** Logs in through endpoints 1 and 2 with the OTP that was really sent; returns the token. */
export async function login(lipa: Lipa, loginName: string, password: string): Promise<string> {
  const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: loginName, password } });
  if (started.status !== 200) throw new Error(`login failed: ${started.status} ${started.text}`);
  const otp = await lastOtpSentTo(lipa, loginName.toLowerCase());
  const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: loginName, otp } });
  if (confirmed.status !== 200) throw new Error(`confirm failed: ${confirmed.status} ${confirmed.text}`);
  return confirmed.body.token;
}

export interface MerchantSession extends MerchantFixture {
  token: string;
}

/** A merchant with a live session, in one call. */
export async function merchantSession(lipa: Lipa): Promise<MerchantSession> {
  const merchant = await createMerchant(lipa);
  return { ...merchant, token: await login(lipa, merchant.login, merchant.password) };
}

/** Logs a payer in with the staging test OTP. */
export async function payerToken(lipa: Lipa, payer: PayerFixture): Promise<string> {
  await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: payer.phone, password: payer.pin } });
  const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: payer.phone, otp: STAGING_OTP } });
  if (confirmed.status !== 200) throw new Error(`payer confirm failed: ${confirmed.status} ${confirmed.text}`);
  return confirmed.body.token;
}

export const categoryId = async (lipa: Lipa): Promise<string> => {
  const reply = await call(lipa.url, 'GET', '/api/v1/categories');
  return reply.body[0].categoryId;
};

export function posBody(merchantId: string, categoryIdValue: string, overrides: Record<string, unknown> = {}) {
  return {
    categoryId: categoryIdValue,
    posCompanyName: 'Duka Bora Ltd',
    description: 'Groceries in Westlands',
    website: 'https://duka.example',
    resultUrl: 'https://duka.example/lipa/result',
    serverUrl: 'https://api.duka.example',
    trustAllCertificates: false,
    terminalId: unique('T'),
    merchantId,
    ...overrides,
  };
}

export interface MerchantSetup extends MerchantSession {
  keyId: string;
  secret: string;
  terminalId: string;
  posId: string;
}

/** A merchant with a session, a signing key and a point of sale, in one call. */
export async function merchantWithPos(lipa: Lipa, posOverrides: Record<string, unknown> = {}): Promise<MerchantSetup> {
  const session = await merchantSession(lipa);
  const key = await call(lipa.url, 'POST', '/api/v1/api-keys', { token: session.token, body: {} });
  if (key.status !== 201) throw new Error(`api key fixture failed: ${key.status} ${key.text}`);
  const pos = await call(lipa.url, 'POST', '/api/v1/points-of-sale', {
    token: session.token,
    body: posBody(session.merchantId, await categoryId(lipa), posOverrides),
  });
  if (pos.status !== 201) throw new Error(`POS fixture failed: ${pos.status} ${pos.text}`);
  return { ...session, keyId: key.body.keyId, secret: key.body.secret, terminalId: pos.body.terminalId, posId: pos.body.posId };
}

/** A valid payment request body for the merchant's terminal. */
export function paymentBody(setup: { terminalId: string }, overrides: Record<string, unknown> = {}) {
  return {
    terminalId: setup.terminalId,
    currency: 'KES',
    amount: 1500.5,
    merchantStika: 'KES_100234',
    orderId: unique('order-'),
    description: 'Two bags of unga',
    payer: { method: 'phone', value: '254708000001' },
    urls: { callbackUrl: 'http://127.0.0.1:9/unused', successRedirectUrl: 'https://duka.example/thanks' },
    ...overrides,
  };
}
