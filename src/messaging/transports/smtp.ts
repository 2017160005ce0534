import nodemailer, { type SendMailOptions, type SMTPPoolSentMessageInfo, type Transporter } from 'nodemailer';
import { DEFAULT_SMTP_FROM } from '../../config.js';
import { PLAIN_ADDRESS } from '../address.js';
import { parseSmtpUrl } from './smtp-url.js';
import {
  type EmailTransport,
  type OutboundEmail,
  PermanentSendError,
  type SendResult,
  SLOT_WAIT_MS,
  SlotQueue,
  TransientSendError,
  TransportClosedError,
  waitBudget,
} from './transport.js';

export interface SmtpTransportOptions {
  /** The From header and envelope sender; default `Lipa <no-reply@lipa.local>`. */
  from?: string;
  /** Verify the server's TLS certificate (STARTTLS and smtps); default true. */
  rejectUnauthorized?: boolean;
  /**
   * When STARTTLS is required, offered or not, so that a man in the middle who strips it from
   * the server's answer learns nothing: `with-credentials` (default) when SMTP_URL has a user,
   * so the password never goes out in clear; `always` (production) for every message, since
   * they carry login codes. A server that cannot do it gets nothing and the message is retried.
   * smtps:// is TLS from the start either way.
   */
  requireTls?: 'always' | 'with-credentials';
  /** A server on this machine (a literal 127.0.0.0/8 or ::1) is exempt: no network to cross; default true. */
  exemptLoopback?: boolean;
  /** Pooled connections kept open to the server; default 5. */
  poolSize?: number;
  /** How long a send waits for a free connection before it fails, unsent (TransientSendError); default SLOT_WAIT_MS. */
  slotWaitMs?: number;
  /** Connection and greeting timeout in ms; default 30 000. */
  timeoutMs?: number;
  /**
   * How long the server may stay silent mid-conversation, above all before it answers the end
   * of the message (RFC 5321 §4.5.3.2.6: 10 minutes); default 600 000. A send that times out
   * is sent again, and the server may have taken the first one, so a slow server is waited for.
   */
  replyTimeoutMs?: number;
}

/** The bits of a nodemailer/SMTP error we read; nodemailer sets them as plain properties. */
interface SmtpErrorLike {
  code?: unknown;
  responseCode?: unknown;
  response?: unknown;
  command?: unknown;
  message?: unknown;
}

/** Text as RFC 2047 encoded words (UTF-8, base64), each at most 45 bytes of it, never splitting a character. */
function encodedWords(text: string): string {
  const words: string[] = [];
  let chunk = '';
  for (const char of text) {
    if (chunk !== '' && Buffer.byteLength(chunk + char) > 45) {
      words.push(chunk);
      chunk = '';
    }
    chunk += char;
  }
  if (chunk !== '') words.push(chunk);
  return words.map((word) => `=?UTF-8?B?${Buffer.from(word).toString('base64')}?=`).join(' ');
}

/**
 * Whether a host (as SMTP_URL writes it) is this machine: a literal 127.0.0.0/8 or ::1. Not
 * the name `localhost`: nodemailer resolves names with DNS queries, and a forged answer must
 * not get the exemption.
 */
function isLoopback(host: string): boolean {
  return host === '::1' || /^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$/.test(host);
}

/** Error codes that say the connection or the server setup is at fault, never the message. */
const TRANSIENT_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ETLS', 'EAUTH', 'ENOAUTH', 'EPROTOCOL', 'EREQUIRETLS']);

/**
 * What a message's sender may read of a mail server's refusal: the reply code and the enhanced
 * status code when there is one, never the reply's text (it may name the server and its relays).
 */
function refusedBy(response: unknown, responseCode = 0): string {
  const reply = replyCodes(response);
  const code = reply?.code ?? (responseCode >= 400 ? String(responseCode) : null);
  if (code === null) return 'Refused by the mail server.';
  return `Refused by the mail server: ${code}${reply?.enhanced ? ` ${reply.enhanced}` : ''}.`;
}

/** A 4xx/5xx reply's code and its enhanced status code (RFC 3463) when it has one. */
function replyCodes(response: unknown): { code: string; enhanced: string | undefined } | null {
  const reply = typeof response === 'string' ? /^([45][0-9]{2})[ -](?:([45]\.[0-9]{1,3}\.[0-9]{1,3})\b)?/.exec(response) : null;
  return reply ? { code: reply[1] as string, enhanced: reply[2] } : null;
}

/**
 * Whether a refusal at RCPT TO says the recipient's address itself is bad, the interface's
 * "invalid recipient": an enhanced status 5.1.1 to 5.1.6 or 5.1.10 (bad mailbox, bad system,
 * bad syntax, ambiguous, moved, null MX; RFC 3463, RFC 7505), not 5.1.7 or 5.1.8 (the
 * *sender's* address, which servers also refuse at RCPT TO) nor 5.7.x (policy, relaying).
 * Without an enhanced code, only a reply whose words say the mailbox does not exist: a bare
 * 550 or 553 is as often "relaying denied" or "not in my list of allowed rcpthosts".
 */
function refusesAddress(response: unknown): boolean {
  const reply = replyCodes(response);
  if (typeof response !== 'string' || !reply?.code.startsWith('5')) return false;
  if (reply.enhanced !== undefined) return /^5\.1\.([1-6]|10)$/.test(reply.enhanced);
  if (/\b(sender|relay|rcpthosts|policy|spam|blocked|denied)\b/i.test(response)) return false;
  return /\b(user unknown|unknown user|no such (user|mailbox|recipient|address)|mailbox (not found|does not exist)|does not exist|recipient unknown|invalid (recipient|mailbox))\b/i.test(
    response,
  );
}

/**
 * Email over SMTP through a pool of nodemailer connections. `send` resolves once the server
 * accepted the message (250 after DATA): status `sent`, providerId = the Message-ID.
 */
export class SmtpTransport implements EmailTransport {
  readonly name = 'smtp';
  readonly #mailer: Transporter<SMTPPoolSentMessageInfo>;
  readonly #from: string;
  /** The right-hand side of Message-IDs: the sender's domain. */
  readonly #idDomain: string;
  /** Strings that must never appear in an error message (the password and its encodings). */
  readonly #secrets: string[];
  readonly #where: string;
  /** Whether every connection must upgrade with STARTTLS before anything is sent (see requireTls). */
  readonly requiresTls: boolean;
  /**
   * Sends handed to nodemailer at once: one per pooled connection. The rest wait here rather
   * than in nodemailer's queue, which is first come first served, so that the service's own
   * messages can go first.
   */
  readonly #poolSize: number;
  #active = 0;
  /**
   * Merchants' sends use at most all connections but one: the last is kept for the service's
   * own messages, which a server holding every connection for minutes (a slow or stalling
   * one) would otherwise keep from going out at all. (A pool of one has none to keep.)
   */
  readonly #merchantMax: number;
  #merchantActive = 0;
  readonly #waiting = new SlotQueue();
  /** close() waiting for the sends on the wire to finish. */
  readonly #idleWaiters: Array<() => void> = [];
  readonly #slotWaitMs: number;
  #closed = false;
  #closing: Promise<void> | null = null;

  constructor(smtpUrl: string, options: SmtpTransportOptions = {}) {
    const target = parseSmtpUrl(smtpUrl);
    const timeoutMs = options.timeoutMs ?? 30_000;
    const poolSize = options.poolSize ?? 5;
    if (!Number.isInteger(poolSize) || poolSize < 1) throw new Error('SmtpTransport poolSize must be a whole number >= 1');
    this.#poolSize = poolSize;
    this.#merchantMax = Math.max(1, poolSize - 1);
    this.#slotWaitMs = options.slotWaitMs ?? SLOT_WAIT_MS;
    this.#from = options.from ?? DEFAULT_SMTP_FROM;
    this.#idDomain = /@([^\s<>@]+?)>?\s*$/.exec(this.#from)?.[1] ?? 'lipa.local';
    this.#where = `${target.secure ? 'smtps' : 'smtp'}://${target.host}:${target.port}`;
    this.#secrets = secretForms(target.user, target.pass);
    this.requiresTls =
      !target.secure &&
      !((options.exemptLoopback ?? true) && isLoopback(target.host)) &&
      (options.requireTls === 'always' || target.user !== null);
    this.#mailer = nodemailer.createTransport({
      pool: true,
      maxConnections: poolSize,
      host: target.host,
      port: target.port,
      secure: target.secure,
      requireTLS: this.requiresTls,
      // smtp://: nodemailer upgrades with STARTTLS whenever the server offers it (and fails
      // rather than going on in clear if the upgrade fails); it does not demand it.
      ...(target.user !== null ? { auth: { user: target.user, pass: target.pass ?? '' } } : {}),
      tls: { rejectUnauthorized: options.rejectUnauthorized ?? true },
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: options.replyTimeoutMs ?? 600_000,
      // Never log: a debug transcript would carry the AUTH exchange.
      logger: false,
      debug: false,
    });
    // A pooled connection failing while idle is not a send failure (the next send reconnects);
    // an unhandled 'error' event would end the process.
    this.#mailer.on('error', () => undefined);
  }

  async send(message: OutboundEmail): Promise<SendResult> {
    if (!PLAIN_ADDRESS.test(message.to)) {
      throw new PermanentSendError(
        'email recipient must be a single plain address (name@domain)',
        'Not sent: the recipient must be a single plain address (name@domain).',
      );
    }
    const mail: SendMailOptions = {
      from: this.#from,
      to: message.to,
      // Text that looks like an encoded word would be decoded by mail clients (RFC 2047):
      // "=?UTF-8?B?QmNjOiB4QGV2aWwuY29t?=" would show as "Bcc: x@evil.com". Encoded itself, it shows as sent.
      subject: message.subject.includes('=?') ? encodedWords(message.subject) : message.subject,
      headers: { 'X-Lipa-Message-Id': message.id },
      // The same Message-ID on every try: if a try the server had accepted is sent again (its
      // answer lost, or the service stopped before recording it), receivers can tell.
      messageId: `<${message.id}@${this.#idDomain}>`,
      // Like the Message-ID, the Date is the message's own, not the try's (RFC 5322 §3.6.1:
      // when it was ready to go out).
      date: new Date(message.createdAt),
      ...(message.contentType === 'html' ? { html: message.content } : { text: message.content }),
    };
    let info: SMTPPoolSentMessageInfo;
    const urgent = message.urgent === true;
    await this.#slot(urgent, message.notAfter, message.first === true);
    try {
      info = await this.#mailer.sendMail(mail);
    } catch (error) {
      throw this.#classify(error);
    } finally {
      this.#release(urgent);
    }
    // With one recipient a refusal rejects the send; a partial acceptance cannot happen, but
    // if a server ever answers so, the recipient was refused.
    if (info.accepted.length === 0 || info.rejected.length > 0) {
      throw new PermanentSendError(
        this.#scrub(`SMTP server ${this.#where} refused the recipient: ${info.response}`),
        refusedBy(info.response),
      );
    }
    return { status: 'sent', providerId: info.messageId ?? null };
  }

  /** Refuses the sends waiting for a connection (TransportClosedError), finishes those on the wire, then closes the pool. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    this.#waiting.wakeAll();
    if (this.#active > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    this.#mailer.close();
  }

  /** Waits for a free connection; the service's own messages are handed one first, and have one kept for them. */
  async #slot(urgent: boolean, notAfter: number | undefined, first: boolean): Promise<void> {
    if (this.#closed) throw new TransportClosedError('SMTP transport');
    if (this.#active < this.#poolSize && (urgent || this.#merchantActive < this.#merchantMax)) {
      this.#take(urgent);
      return;
    }
    // A slot is handed over by the send that frees it (#release), counted for this send already.
    const budget = waitBudget(notAfter, this.#slotWaitMs);
    const how = await this.#waiting.wait(urgent, budget.ms, this.#waiting.place(first));
    if (how === 'timeout') throw new TransientSendError(`no free connection to ${this.#where} ${budget.ranOut}`);
    if (this.#closed) {
      // Closed meanwhile: a slot handed over before close() goes back (close() waits for the
      // count to reach 0). Defensive: today the waiter resumes in the same turn as the
      // hand-over, before anything can call close(), so a handed slot is always used.
      if (how === 'handed') this.#release(urgent);
      throw new TransportClosedError('SMTP transport');
    }
  }

  #take(urgent: boolean): void {
    this.#active++;
    if (!urgent) this.#merchantActive++;
  }

  /** Frees a send's connection, handing it to the next in line who may have it. */
  #release(urgent: boolean): void {
    this.#active--;
    if (!urgent) this.#merchantActive--;
    // An own message first; a merchant's only while merchants hold fewer than their share.
    const woken = this.#waiting.wake(this.#merchantActive >= this.#merchantMax);
    if (woken !== null) this.#take(woken === 'urgent');
    else if (this.#active === 0) for (const idle of this.#idleWaiters.splice(0)) idle();
  }

  #classify(error: unknown): Error {
    const e = (typeof error === 'object' && error !== null ? error : {}) as SmtpErrorLike;
    const code = typeof e.code === 'string' ? e.code : '';
    const responseCode = typeof e.responseCode === 'number' ? e.responseCode : 0;
    const detail = typeof e.message === 'string' ? e.message : String(error);
    // The server's reply is about this message only when the server answered one of its commands.
    const reason = responseCode >= 400 && !TRANSIENT_CODES.has(code) ? refusedBy(e.response, responseCode) : null;
    const text = this.#scrub(
      `SMTP send via ${this.#where} failed${code ? ` (${code}${responseCode ? ` ${responseCode}` : ''})` : ''}: ${detail}`,
    );
    // Authentication, TLS and connection trouble is the service's setup or the network, not
    // this message: worth retrying once fixed, even when the server said 5xx (535 bad login).
    if (TRANSIENT_CODES.has(code)) return new TransientSendError(text);
    if (responseCode >= 500) return new PermanentSendError(text, reason, e.command === 'RCPT TO' && refusesAddress(e.response));
    if (responseCode >= 400) return new TransientSendError(text, reason);
    // Refused before any SMTP exchange for this message (e.g. no valid recipient): retrying won't help.
    if (code === 'EENVELOPE' || code === 'EMESSAGE') return new PermanentSendError(text);
    return new TransientSendError(text);
  }

  #scrub(text: string): string {
    let out = text;
    for (const secret of this.#secrets) out = out.split(secret).join('***');
    return out;
  }
}

/** The password as it could show up in a message: raw, URL-encoded, and in AUTH PLAIN/LOGIN base64. */
function secretForms(user: string | null, pass: string | null): string[] {
  if (pass === null || pass === '') return [];
  const forms = [
    pass,
    encodeURIComponent(pass),
    Buffer.from(pass).toString('base64'),
    Buffer.from(`\u0000${user ?? ''}\u0000${pass}`).toString('base64'),
  ];
  // Longest first, so a form containing another is replaced whole.
  return [...new Set(forms)].filter((s) => s.length >= 3).sort((a, b) => b.length - a.length);
}
