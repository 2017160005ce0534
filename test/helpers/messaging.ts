import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import type { MessageTable } from '../../src/db/schema.js';
import { call, type MerchantFixture, type Reply } from './client.js';
import type { Lipa } from './harness.js';
import type { ReceivedMail, SmtpPeer } from './smtp-peer.js';

/** What the messaging tests share: requests to endpoints 7 and 8, their bodies, and waits. */

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const MESSAGE_ID = /^msg_[0-9a-f]{32,}$/;

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON, valid or not
export type Body = Record<string, any>;

export const send = (lipa: Lipa, apiKey: string | null, message: Body): Promise<Reply> =>
  call(lipa.url, 'POST', '/api/messages', { body: { message }, headers: apiKey === null ? {} : { api_key: apiKey } });

export const lookup = (lipa: Lipa, apiKey: string | null, id: string): Promise<Reply> =>
  call(lipa.url, 'GET', `/api/messages/${encodeURIComponent(id)}`, { headers: apiKey === null ? {} : { api_key: apiKey } });

export const email = (overrides: Body = {}): Body => ({
  type: 'email',
  email: 'wanjiru@example.com',
  subject: 'Your receipt',
  content: 'Asante for your payment.',
  ...overrides,
});

export const sms = (overrides: Body = {}): Body => ({
  type: 'sms',
  phone: { country_code: '254', number: '712345678' },
  content: 'Your order 42 is ready.',
  ...overrides,
});

export const keysOf = (value: unknown): string[] => Object.keys(value as object).sort();

export async function countMessages(lipa: Lipa): Promise<number> {
  const row = await lipa.ctx.store.db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function messageRow(lipa: Lipa, id: string): Promise<MessageTable> {
  return lipa.ctx.store.db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

export async function messagingKey(lipa: Lipa, token: string): Promise<{ id: string; apiKey: string }> {
  const reply = await call(lipa.url, 'POST', '/api/v1/messaging-keys', { token, body: {} });
  assert.equal(reply.status, 201, reply.text);
  return { id: reply.body.id, apiKey: reply.body.apiKey };
}

/** Polls GET /api/messages/{id} until its status is one of `wanted`; returns the last `data`. */
export async function waitForStatus(lipa: Lipa, apiKey: string, id: string, wanted: string[], timeoutMs = 5_000): Promise<Body> {
  const deadline = Date.now() + timeoutMs;
  let last: Body | undefined;
  for (;;) {
    const reply = await lookup(lipa, apiKey, id);
    assert.equal(reply.status, 200, reply.text);
    last = reply.body.data as Body;
    if (wanted.includes(last.status)) return last;
    if (Date.now() > deadline) assert.fail(`message ${id} is still ${last.status} after ${timeoutMs} ms (wanted ${wanted.join('/')})`);
    await sleep(50);
  }
}

export async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * A mail server that is down: a port on 127.0.0.1 whose every connection is closed at once.
 * Held, not merely free, so that no other test's server can take it meanwhile (one that
 * accepted and stayed silent would hold each try for the 30 s greeting timeout). `release`
 * frees it, to start the real server there.
 */
export async function downServer(): Promise<{ port: number; release: () => Promise<void> }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return { port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** The email the SMTP peer received for a Lipa message id (the X-Lipa-Message-Id header). */
export const mailFor = (peer: SmtpPeer, id: string): ReceivedMail | undefined =>
  peer.received.find((m) => m.headers['x-lipa-message-id'] === id);

/** The 6-digit code of the newest email the SMTP peer received for `to` after `skip` emails. */
export async function otpFromPeer(peer: SmtpPeer, to: string, skip: number): Promise<{ code: string; mail: ReceivedMail }> {
  let found: ReceivedMail | undefined;
  await until(`an OTP email to ${to}`, () => {
    found = peer.received.slice(skip).find((m) => m.to.includes(to));
    return found !== undefined;
  });
  const mail = found as ReceivedMail;
  const code = mail.text?.match(/\b([0-9]{6})\b/)?.[1];
  assert.ok(code, `a 6-digit code in the email text: ${mail.text}`);
  return { code, mail };
}

/** Merchant login when OTP emails really leave over SMTP (the stored copy has its digits hidden). */
export async function loginOverSmtp(lipa: Lipa, peer: SmtpPeer, merchant: MerchantFixture): Promise<string> {
  const skip = peer.received.length;
  const started = await call(lipa.url, 'POST', '/api/v1/authorization', { body: { login: merchant.login, password: merchant.password } });
  assert.equal(started.status, 200, started.text);
  const { code } = await otpFromPeer(peer, merchant.login.toLowerCase(), skip);
  const confirmed = await call(lipa.url, 'POST', '/api/v1/authorization/confirm', { body: { login: merchant.login, otp: code } });
  assert.equal(confirmed.status, 200, confirmed.text);
  return confirmed.body.token;
}
