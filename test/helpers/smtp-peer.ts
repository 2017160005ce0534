import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { selfSignedCertificate } from './self-signed.js';

export interface ReceivedMail {
  /** Envelope sender (MAIL FROM). */
  from: string;
  /** Envelope recipients (RCPT TO). */
  to: string[];
  subject: string;
  /** The text/plain body; null when the message has none (mailparser's text derived from html is not kept). */
  text: string | null;
  /** The text/html body; null when the message has none. */
  html: string | null;
  /** The message's own Content-Type (its body part for a single-part message), e.g. `text/plain`. */
  contentType: string;
  /** Header name (lower case) → raw value as received, the last one wins. */
  headers: Record<string, string>;
  /** Whether the SMTP session was over TLS (STARTTLS or implicit) when the message came in. */
  secure: boolean;
  /** The user the session authenticated as, null without AUTH. */
  user: string | null;
  /** The SMTP session id, to tell connections apart. */
  sessionId: string;
  at: number;
}

export interface SmtpPeerOptions {
  /** Require AUTH (PLAIN/LOGIN) with these credentials; without it, AUTH is not offered. */
  auth?: { user: string; pass: string };
  /** Offer STARTTLS with a self-signed certificate (CN=localhost). Default false: STARTTLS not offered. */
  starttls?: boolean;
  /** Recipients answered `550 <address>: no such user` at RCPT TO. */
  rejectRecipients?: string[];
  /** Recipients answered at RCPT TO with this code and text, e.g. `[550, '5.7.1 Relaying denied']`. */
  recipientReplies?: Record<string, [number, string]>;
  /** Answer `451` after DATA to the next N messages. */
  failNext?: number;
  /** Listen on this port (e.g. where a service was already told to deliver); default an ephemeral port. */
  port?: number;
  /** Wait this long after a message's data before answering it (a slow server). */
  replyDelayMs?: number;
}

/** A real SMTP server on 127.0.0.1 that parses and records every message it accepts. */
export interface SmtpPeer {
  /** `smtp://user:pass@127.0.0.1:port` (no credentials without `auth`). */
  url: string;
  port: number;
  received: ReceivedMail[];
  /** Messages still to be answered 451; may be changed between sends. */
  failNext: number;
  /** How long each message's answer waits; may be changed between sends. */
  replyDelayMs: number;
  /** AUTH commands received, right or wrong. */
  authAttempts: number;
  /** Called with each message as it is recorded, before it is answered. */
  onReceived: ((mail: ReceivedMail) => void) | null;
  /** Resolves when at least `count` messages have arrived (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  close(): Promise<void>;
}

function smtpError(message: string, responseCode: number): Error {
  return Object.assign(new Error(message), { responseCode });
}

export async function startSmtpPeer(options: SmtpPeerOptions = {}): Promise<SmtpPeer> {
  const rejected = new Set((options.rejectRecipients ?? []).map((a) => a.toLowerCase()));
  const tls: Pick<SMTPServerOptions, 'key' | 'cert'> = options.starttls ? selfSignedCertificate() : {};
  const disabled: string[] = [];
  // Without key/cert smtp-server would still offer STARTTLS with its bundled certificate.
  if (!options.starttls) disabled.push('STARTTLS');
  if (!options.auth) disabled.push('AUTH');

  const peer: SmtpPeer = {
    url: '',
    port: 0,
    received: [],
    failNext: options.failNext ?? 0,
    replyDelayMs: options.replyDelayMs ?? 0,
    authAttempts: 0,
    onReceived: null,
    waitFor: async (count, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs;
      while (peer.received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} emails, got ${peer.received.length}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return peer.received;
    },
    close: async () => undefined,
  };

  const server = new SMTPServer({
    ...tls,
    secure: false,
    logger: false,
    disabledCommands: disabled,
    authOptional: !options.auth,
    // Let AUTH work in clear too, so auth can be tested with and without STARTTLS.
    allowInsecureAuth: true,
    closeTimeout: 500,
    onAuth(auth, _session, callback) {
      peer.authAttempts++;
      const want = options.auth;
      if (want && auth.username === want.user && auth.password === want.pass) {
        callback(null, { user: auth.username });
        return;
      }
      callback(smtpError('Invalid username or password', 535));
    },
    onRcptTo(address, _session, callback) {
      if (rejected.has(address.address.toLowerCase())) {
        callback(smtpError(`<${address.address}>: no such user`, 550));
        return;
      }
      const refusal = options.recipientReplies?.[address.address.toLowerCase()];
      if (refusal) {
        callback(smtpError(refusal[1], refusal[0]));
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          if (peer.failNext > 0) {
            peer.failNext -= 1;
            callback(smtpError('Temporary local problem, try again later', 451));
            return;
          }
          const headers: Record<string, string> = {};
          for (const { key, line } of parsed.headerLines) {
            headers[key.toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
          }
          const contentType = (parsed.headers.get('content-type') as { value?: string } | undefined)?.value ?? 'text/plain';
          // mailparser derives text from html and html from text; for a single-part message keep
          // only the body that was really sent.
          const multipart = contentType.startsWith('multipart/');
          const mailFrom = session.envelope.mailFrom;
          peer.received.push({
            from: mailFrom ? mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            subject: parsed.subject ?? '',
            text: typeof parsed.text === 'string' && (multipart || contentType === 'text/plain') ? parsed.text : null,
            html: typeof parsed.html === 'string' && (multipart || contentType === 'text/html') ? parsed.html : null,
            contentType,
            headers,
            secure: session.secure,
            user: typeof session.user === 'string' ? session.user : null,
            sessionId: session.id,
            at: Date.now(),
          });
          peer.onReceived?.(peer.received[peer.received.length - 1] as ReceivedMail);
          if (peer.replyDelayMs > 0) setTimeout(() => callback(), peer.replyDelayMs);
          else callback();
        })
        .catch((error: unknown) => callback(error instanceof Error ? error : new Error(String(error))));
    },
  });
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;
  const credentials = options.auth ? `${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@` : '';
  peer.port = port;
  peer.url = `smtp://${credentials}127.0.0.1:${port}`;
  peer.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
    });
  return peer;
}
