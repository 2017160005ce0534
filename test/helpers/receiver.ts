import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { selfSignedCertificate } from './self-signed.js';

export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** The exact body bytes, as text. */
  body: string;
  at: number;
  /** When the connection of the answer closed (set once it has). */
  closedAt?: number;
}

/**
 * A real HTTP(S) server on 127.0.0.1 that records every request, for callbacks and
 * redirects. `respond` decides each answer's status (default 200).
 */
export interface Receiver {
  url: string;
  received: Received[];
  /**
   * The status to answer with; null holds the request open, unanswered (a receiver that
   * hangs); `{status, unfinished: true}` sends the status line and a first chunk of body,
   * and never ends it; `{status, afterMs}` answers that status after a while (a slow receiver);
   * `{status, when}` answers it once the promise settles (requests held until the test lets go).
   */
  respond: (
    request: Received,
    index: number,
  ) =>
    | number
    | null
    | { status: number; unfinished: true }
    | { status: number; afterMs: number }
    | { status: number; when: Promise<unknown> };
  /** Resolves when at least `count` requests have arrived (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

/** `port`: a given one (a receiver that comes up where callbacks were failing); default any free one. */
export async function startReceiver(options: { https?: boolean; port?: number } = {}): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    received: [],
    respond: () => 200,
    waitFor: async (count, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs;
      while (receiver.received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} requests, got ${receiver.received.length}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return receiver.received;
    },
    close: async () => undefined,
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const entry: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      const status = receiver.respond(entry, receiver.received.length);
      receiver.received.push(entry);
      res.on('close', () => {
        entry.closedAt = Date.now();
      });
      const answer = (code: number) => res.writeHead(code, { 'content-type': 'text/plain' }).end('ok');
      if (typeof status === 'number') answer(status);
      else if (status !== null && 'afterMs' in status) setTimeout(() => answer(status.status), status.afterMs);
      else if (status !== null && 'when' in status) void status.when.finally(() => answer(status.status));
      else if (status !== null) res.writeHead(status.status, { 'content-type': 'text/plain' }).write('partial');
    });
  };
  const server = options.https ? createHttpsServer(selfSignedCertificate(), handler) : createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  receiver.url = `${options.https ? 'https' : 'http'}://127.0.0.1:${port}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}
