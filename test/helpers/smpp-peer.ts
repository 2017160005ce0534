import type { AddressInfo } from 'node:net';
import smpp from 'smpp';
import { selfSignedCertificate } from './self-signed.js';

export interface SubmittedSms {
  source: string;
  sourceTon: number;
  sourceNpi: number;
  destination: string;
  destTon: number;
  destNpi: number;
  /** The text, decoded by the package according to data_coding. */
  text: string;
  dataCoding: number;
  /** Whether the text came in the message_payload TLV (else short_message). */
  payload: boolean;
  registeredDelivery: number;
  messageId: string;
  at: number;
}

export interface SmppPeerOptions {
  systemId?: string;
  password?: string;
  /** Send a delivery receipt (deliver_sm) for every accepted submit_sm. */
  receipts?: boolean;
  receiptDelayMs?: number;
  /** Put receipted_message_id and message_state TLVs in receipts (default true); the text is always there. */
  receiptTlvs?: boolean;
  /**
   * Write each receipt's id in decimal, though submit_sm_resp gave it in hex, as many SMSCs do
   * (Kannel's msg-id-type 1): in the text and the TLV, or (`'text'`) in the text only, the TLV
   * repeating the submit's id as SMPP 3.4 has it.
   */
  receiptIdsDecimal?: boolean | 'text';
  /** Destinations whose receipt says stat:UNDELIV. */
  undeliverable?: string[];
  /** Destinations answered with ESME_RINVDSTADR (0x0B). */
  rejectDestinations?: string[];
  /** Destinations answered with ESME_RTHROTTLED (0x58). */
  throttleDestinations?: string[];
  /** Destinations answered with ESME_RMSGQFUL (0x14): the subscriber's queue is full. */
  queueFullDestinations?: string[];
  /** Wait this long before each submit_sm_resp (responses stay in order of arrival per timer). */
  submitDelayMs?: number;
  /** Send each receipt over another bound session than the one that submitted (another instance's bind) when there is one. */
  receiptsViaOtherSession?: boolean;
  /** SMPP over TLS with a throwaway self-signed certificate (url is smpps://). */
  tls?: boolean;
}

type BindCommand = 'bind_transceiver' | 'bind_transmitter' | 'bind_receiver';

/**
 * A real SMPP 3.4 server (the `smpp` package's createServer) on 127.0.0.1 standing in for an
 * SMSC: checks the bind's credentials, answers enquire_link, answers submit_sm with a unique
 * message_id and records it, and optionally sends delivery receipts back.
 */
export interface SmppPeer {
  url: string;
  port: number;
  systemId: string;
  password: string;
  /** PEM of the self-signed certificate when started with `tls`. */
  certificate: string | null;
  submitted: SubmittedSms[];
  /** Successful / refused binds, enquire_link requests, unbind requests received. */
  binds: number;
  /** The command of each successful bind, in order (bind_transceiver, bind_transmitter, bind_receiver). */
  bindCommands: string[];
  bindFailures: number;
  enquireLinks: number;
  unbinds: number;
  /** command_status of every deliver_sm_resp received (one per receipt). */
  receiptAnswers: number[];
  /** Most submit_sm received but not yet answered at one time (with submitDelayMs). */
  maxOutstanding: number;
  /** Whether enquire_link gets answered (set false to play a dead link). */
  answerEnquireLink: boolean;
  /** When set, the message_id every submit_sm is answered with (an SMSC that reuses ids). */
  fixedMessageId: string | null;
  /** While true, every submit_sm is answered ESME_RTHROTTLED (an SMSC over its agreed throughput). */
  throttling: boolean;
  /** This many of the next submit_sm are answered ESME_RTHROTTLED. */
  throttleNext: number;
  /** When set, only this many more submit_sm are taken, and the rest throttled (a rate limit) until it is set to null. */
  takeOnly: number | null;
  /** When each submit_sm answered ESME_RTHROTTLED came (Date.now()), for any reason. */
  throttledAt: number[];
  /** Sends a deliver_sm with these fields to a bound session; resolves with its answer's command_status. */
  deliver(fields: Record<string, unknown>): Promise<number>;
  /** Resolves when at least `count` submit_sm have been recorded (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<SubmittedSms[]>;
  /** Resolves when `probe` is true (rejects after `timeoutMs`). */
  until(what: string, probe: () => boolean, timeoutMs?: number): Promise<void>;
  /** Open client connections. */
  connections(): number;
  /** Cuts every connection at once (no unbind), or only those bound with `command`. */
  dropConnections(command?: BindCommand): void;
  /** Asks every bound client to unbind, as an SMSC going down for maintenance does. */
  unbindAll(): void;
  /** Stops listening and drops connections; `start()` listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startSmppPeer(options: SmppPeerOptions = {}): Promise<SmppPeer> {
  const systemId = options.systemId ?? 'lipa';
  const password = options.password ?? 'secret1';
  const undeliverable = new Set(options.undeliverable ?? []);
  const rejected = new Set(options.rejectDestinations ?? []);
  const throttled = new Set(options.throttleDestinations ?? []);
  const queueFull = new Set(options.queueFullDestinations ?? []);
  const receiptTlvs = options.receiptTlvs ?? true;
  const idPrefix = Math.random().toString(16).slice(2, 8);
  let nextId = 1;
  let outstanding = 0;
  let server: smpp.Server | null = null;
  /** Receipts that found no bound session yet; sent on the next bind, as an SMSC does. */
  const queuedReceipts: Array<Record<string, unknown>> = [];
  /** Bound sessions and what they bound as: a transmitter takes submits only, a receiver gets receipts only. */
  const bound = new Map<smpp.Session, BindCommand>();
  const receiving = () => [...bound].filter(([, command]) => command !== 'bind_transmitter').map(([session]) => session);
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const tlsOptions: { key: Buffer; cert: Buffer } | null = options.tls ? selfSignedCertificate() : null;

  const sendReceipt = (receipt: Record<string, unknown>, submitter?: smpp.Session) => {
    const sessions = receiving();
    const session = (options.receiptsViaOtherSession && sessions.find((s) => s !== submitter)) || sessions[0];
    if (!session?.deliver_sm(receipt, (resp) => peer.receiptAnswers.push(resp.command_status))) {
      queuedReceipts.push(receipt);
    }
  };

  const onSession = (session: smpp.Session) => {
    session.on('error', () => session.destroy());
    session.socket.on('close', () => bound.delete(session));
    const onBind = (command: BindCommand) => (pdu: smpp.PDU) => {
      if (pdu.system_id !== systemId || pdu.password !== password) {
        peer.bindFailures++;
        const status = pdu.system_id !== systemId ? smpp.errors.ESME_RINVSYSID : smpp.errors.ESME_RINVPASWD;
        session.send(pdu.response({ command_status: status }));
        session.close();
        return;
      }
      peer.binds++;
      peer.bindCommands.push(command);
      bound.set(session, command);
      session.send(pdu.response({ system_id: 'lipa-test-smsc' }));
      if (command !== 'bind_transmitter') for (const receipt of queuedReceipts.splice(0)) sendReceipt(receipt);
    };
    for (const command of ['bind_transceiver', 'bind_transmitter', 'bind_receiver'] as const) session.on(command, onBind(command));
    session.on('enquire_link', (pdu: smpp.PDU) => {
      peer.enquireLinks++;
      if (peer.answerEnquireLink) session.send(pdu.response());
    });
    session.on('unbind', (pdu: smpp.PDU) => {
      peer.unbinds++;
      bound.delete(session);
      session.send(pdu.response());
      session.close();
    });
    session.on('submit_sm', (pdu: smpp.PDU) => {
      if (!bound.has(session) || bound.get(session) === 'bind_receiver') {
        session.send(pdu.response({ command_status: smpp.errors.ESME_RINVBNDSTS }));
        return;
      }
      const destination = String(pdu.destination_addr);
      const respond = (response: smpp.PDU) => {
        if (!options.submitDelayMs) {
          session.send(response);
          return;
        }
        outstanding++;
        peer.maxOutstanding = Math.max(peer.maxOutstanding, outstanding);
        later(options.submitDelayMs, () => {
          outstanding--;
          session.send(response);
        });
      };
      if (rejected.has(destination)) return respond(pdu.response({ command_status: smpp.errors.ESME_RINVDSTADR }));
      if (queueFull.has(destination)) return respond(pdu.response({ command_status: smpp.errors.ESME_RMSGQFUL }));
      const overRate = peer.takeOnly !== null && peer.takeOnly-- <= 0;
      if (overRate || peer.throttling || peer.throttleNext > 0 || throttled.has(destination)) {
        peer.throttleNext = Math.max(0, peer.throttleNext - 1);
        peer.throttledAt.push(Date.now());
        return respond(pdu.response({ command_status: smpp.errors.ESME_RTHROTTLED }));
      }

      const messageId = peer.fixedMessageId ?? `${idPrefix}${(nextId++).toString(16).padStart(8, '0')}`;
      const payload = messageOf(pdu.message_payload);
      const entry: SubmittedSms = {
        source: String(pdu.source_addr),
        sourceTon: Number(pdu.source_addr_ton),
        sourceNpi: Number(pdu.source_addr_npi),
        destination,
        destTon: Number(pdu.dest_addr_ton),
        destNpi: Number(pdu.dest_addr_npi),
        text: payload ?? messageOf(pdu.short_message) ?? '',
        dataCoding: Number(pdu.data_coding),
        payload: payload !== undefined,
        registeredDelivery: Number(pdu.registered_delivery),
        messageId,
        at: Date.now(),
      };
      peer.submitted.push(entry);
      respond(pdu.response({ message_id: messageId }));

      if (options.receipts && entry.registeredDelivery & 1) {
        later(options.receiptDelayMs ?? 20, () => {
          const ok = !undeliverable.has(destination);
          const stamp = smppDate(new Date());
          const stat = ok ? 'DELIVRD' : 'UNDELIV';
          const receiptId = options.receiptIdsDecimal ? BigInt(`0x${messageId}`).toString(10) : messageId;
          const text = `id:${receiptId} sub:001 dlvrd:${ok ? '001' : '000'} submit date:${stamp} done date:${stamp} stat:${stat} err:${ok ? '000' : '001'} text:`;
          sendReceipt(
            {
              source_addr_ton: entry.destTon,
              source_addr_npi: entry.destNpi,
              source_addr: destination,
              dest_addr_ton: entry.sourceTon,
              dest_addr_npi: entry.sourceNpi,
              destination_addr: entry.source,
              esm_class: 0x04, // MC delivery receipt
              data_coding: 0,
              short_message: text,
              ...(receiptTlvs
                ? { receipted_message_id: options.receiptIdsDecimal === 'text' ? messageId : receiptId, message_state: ok ? 2 : 5 }
                : {}),
            },
            session,
          );
        });
      }
    });
  };

  const listen = async (port: number) => {
    const created = tlsOptions ? smpp.createServer(tlsOptions, onSession) : smpp.createServer(onSession);
    await new Promise<void>((resolve, reject) => {
      created.once('error', reject);
      created.listen(port, '127.0.0.1', () => resolve());
    });
    server = created;
    return (created.address() as AddressInfo).port;
  };

  const stopServer = async () => {
    const current = server;
    server = null;
    if (!current) return;
    const closed = new Promise<void>((resolve) => current.close(() => resolve()));
    for (const session of [...current.sessions]) session.destroy();
    bound.clear();
    await closed;
  };

  const port = await listen(0);
  const peer: SmppPeer = {
    url: `${options.tls ? 'smpps' : 'smpp'}://${encodeURIComponent(systemId)}:${encodeURIComponent(password)}@127.0.0.1:${port}`,
    port,
    systemId,
    password,
    certificate: tlsOptions ? tlsOptions.cert.toString() : null,
    submitted: [],
    binds: 0,
    bindCommands: [],
    bindFailures: 0,
    enquireLinks: 0,
    unbinds: 0,
    receiptAnswers: [],
    maxOutstanding: 0,
    answerEnquireLink: true,
    fixedMessageId: null,
    throttling: false,
    throttleNext: 0,
    takeOnly: null,
    throttledAt: [],
    deliver: (fields) =>
      new Promise<number>((resolve, reject) => {
        const [session] = receiving();
        if (!session) return reject(new Error('SMPP peer: no bound session to deliver to'));
        session.deliver_sm({ source_addr: '254700000000', destination_addr: 'LIPA', data_coding: 0, ...fields }, (resp) =>
          resolve(resp.command_status),
        );
      }),
    waitFor: async (count, timeoutMs = 10_000) => {
      await peer.until(`${count} submit_sm (got ${peer.submitted.length})`, () => peer.submitted.length >= count, timeoutMs);
      return peer.submitted;
    },
    until: async (what, probe, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!probe()) {
        if (Date.now() > deadline) throw new Error(`SMPP peer: timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    connections: () => server?.sessions.length ?? 0,
    dropConnections: (command) => {
      for (const session of [...(server?.sessions ?? [])]) {
        if (command !== undefined && bound.get(session) !== command) continue;
        bound.delete(session);
        session.destroy();
      }
    },
    unbindAll: () => {
      for (const session of [...bound.keys()]) {
        bound.delete(session);
        session.unbind({}, () => session.close());
      }
    },
    stop: stopServer,
    start: async () => {
      if (!server) await listen(port);
    },
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await stopServer();
    },
  };
  return peer;
}

/** A received short_message / message_payload (`{ udh?, message }` after the package's decoding) as text. */
function messageOf(field: unknown): string | undefined {
  if (field === undefined || field === null) return undefined;
  const message = typeof field === 'object' && 'message' in field ? (field as { message: unknown }).message : field;
  if (typeof message === 'string') return message;
  if (Buffer.isBuffer(message)) return message.toString('latin1');
  return undefined;
}

/** SMPP receipt date: YYMMDDhhmm. */
function smppDate(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(date.getUTCFullYear() % 100)}${two(date.getUTCMonth() + 1)}${two(date.getUTCDate())}${two(date.getUTCHours())}${two(date.getUTCMinutes())}`;
}
