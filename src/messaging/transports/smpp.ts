import type { ConnectionOptions } from 'node:tls';
import smpp from 'smpp';
import { backoffMs } from '../../jobs/backoff.js';
import { LogThrottle } from '../../logger.js';
import { countSegments, encodeGsm7, encodeUcs2 } from '../sms-segments.js';
import {
  canonicalMessageId,
  DATA_CODING_GSM,
  DATA_CODING_UCS2,
  describeStatus,
  type MessageIdType,
  NPI_ISDN,
  NPI_UNKNOWN,
  parseDeliveryReceipt,
  STATUS,
  submitError,
  ThrottledSendError,
  TON_ALPHANUMERIC,
  TON_INTERNATIONAL,
  TON_NETWORK_SPECIFIC,
} from './smpp-protocol.js';
import { describeSmppUrl, isSmppSourceAddr, parseSmppUrl, type SmppUrl } from './smpp-url.js';
import {
  type DeliveryReceipt,
  type OutboundSms,
  PermanentSendError,
  type SendResult,
  SLOT_WAIT_MS,
  SlotQueue,
  type SmsTransport,
  TransientSendError,
  TransportClosedError,
  waitBudget,
} from './transport.js';

/**
 * SMS over SMPP 3.4 (the `smpp` package): one transceiver bind per transport (or, for an SMSC
 * that wants them apart, a transmitter bind for submits and a receiver bind for receipts), each
 * kept alive with enquire_link and re-established with back-off after a drop. Many submit_sm are in flight at
 * once on the bind (up to `windowSize`), each matched to its submit_sm_resp by sequence number.
 *
 * Texts go out as GSM 03.38 (data_coding 0, unpacked septets) when every character is in that
 * alphabet, else as UCS-2 big-endian (data_coding 8). A text longer than one SMS goes in the
 * message_payload TLV (short_message empty), so the SMSC splits it and answers with one
 * message_id and one receipt for the whole text.
 *
 * Delivery receipts (deliver_sm) are acknowledged after every listener has run; a listener
 * that returns a promise delays the deliver_sm_resp until it settles, and a rejection answers
 * ESME_RX_T_APPN so the SMSC sends the receipt again later.
 */

/** The subset of a pino logger the transport uses. */
export interface SmppLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface SmppTransportOptions {
  /** SMPP_URL: `smpp://system_id:password@host:port` or `smpps://…`. */
  url: string;
  /** Sender shown to the recipient: alphanumeric (≤ 11 characters) or digits. Default "LIPA". */
  sourceAddr?: string;
  /** Default: 5/0 (alphanumeric) for a name, 1/1 (international, ISDN) for digits. */
  sourceAddrTon?: number;
  sourceAddrNpi?: number;
  /** The bind's system_type; default empty. */
  systemType?: string;
  /**
   * `transceiver` (default): one bind carries the submits and the receipts. `pair`: a
   * transmitter bind for the submits and a receiver bind for the receipts, each its own
   * connection kept up on its own, for SMSCs that do not offer transceiver binds (SMPP_BIND).
   */
  bind?: SmppBind;
  /** Interval of enquire_link while bound; default 30 s. */
  enquireLinkMs?: number;
  /** How long send() waits for a bind while disconnected; default 5 s. */
  bindWaitMs?: number;
  /** Time allowed for the SMSC's other responses (bind, enquire_link, unbind); default 10 s. */
  responseTimeoutMs?: number;
  /**
   * Time allowed for a submit_sm_resp; default 120 s. Longer than the others: a submit that
   * times out is sent again, and the SMSC may have taken the first one, so a slow but live
   * SMSC (its enquire_link answered) is waited for rather than sent copies.
   */
  submitTimeoutMs?: number;
  /** Time allowed for the TCP (and TLS) connection; default 10 s. */
  connectTimeoutMs?: number;
  /** Reconnect back-off: first delay, doubled per failed attempt up to the maximum. Default 0.5 s → 10 s. */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** Most submit_sm awaiting their response at once; further sends queue. Default 1000. */
  windowSize?: number;
  /**
   * How the SMSC writes message ids (SMPP_MSG_ID_TYPE, see MessageIdType); when set, ids are
   * kept as decimal numbers so that a receipt finds its submission. Default: as written.
   */
  messageIdType?: MessageIdType;
  /** Most submit_sm a second (the throughput agreed with the SMSC), evenly spaced; default no limit. */
  maxSubmitsPerSecond?: number;
  /** After ESME_RTHROTTLED, no submit_sm on the bind for this long; default 1 s. */
  throttlePauseMs?: number;
  /**
   * How long a send waits out a throttled bind before it fails with a TransientSendError (and
   * the worker tries it later); default, and at most, SLOT_WAIT_MS (5 min), which bounds all
   * of a send's waiting.
   */
  throttleRetryMs?: number;
  /** Extra options for tls.connect with smpps:// (ca, servername, rejectUnauthorized, …). */
  tlsOptions?: ConnectionOptions;
  logger?: SmppLogger;
}

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

interface Pending {
  fail: (error: Error) => void;
}

type ReceiptListener = (receipt: DeliveryReceipt) => void;

export type SmppBind = 'transceiver' | 'pair';

/** What one connection binds as. */
type BindAs = 'transceiver' | 'transmitter' | 'receiver';

export class SmppTransport implements SmsTransport {
  readonly name = 'smpp';
  /** `smpp://system_id@host:port`, without the password. */
  readonly target: string;

  readonly #server: SmppUrl;
  readonly #sourceAddr: string;
  readonly #sourceTon: number;
  readonly #sourceNpi: number;
  readonly #systemType: string;
  readonly #enquireLinkMs: number;
  readonly #bindWaitMs: number;
  readonly #responseTimeoutMs: number;
  readonly #submitTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #reconnectMinMs: number;
  readonly #reconnectMaxMs: number;
  readonly #windowSize: number;
  readonly #messageIdType: MessageIdType | undefined;
  /** 1000 / maxSubmitsPerSecond; 0 without a limit. */
  readonly #spacingMs: number;
  readonly #throttlePauseMs: number;
  readonly #throttleRetryMs: number;
  readonly #tlsOptions: ConnectionOptions;
  readonly #log: SmppLogger | undefined;
  readonly #bindAs: BindAs;
  /** With `bind: 'pair'`, the receiver bind, a transport of its own that only takes receipts. */
  readonly #receiver: SmppTransport | null;

  #started = false;
  #closed = false;
  #closing: Promise<void> | null = null;
  #session: smpp.Session | null = null;
  #bound = false;
  /** Set when the SMSC sent unbind: the close that follows ends a bind, it is no failed connection. */
  #unboundBySmsc = false;
  /** Set when the SMSC refused the last bind: sends fail at once until a bind succeeds. */
  #bindRefused: string | null = null;
  #lastError: string | null = null;
  #failedAttempts = 0;
  #reconnectTimer: NodeJS.Timeout | null = null;
  #enquireTimer: NodeJS.Timeout | null = null;
  #bindWaiters = new Set<Waiter>();
  readonly #slotWaiters = new SlotQueue();
  #pending = new Set<Pending>();
  #idleWaiters: Array<() => void> = [];
  #corked = false;
  /**
   * No submit_sm before this time (performance.now()): the SMSC throttled the bind, or the
   * throughput limit allows none sooner. Only ever moves forward.
   */
  #gateAt = 0;
  #gateTimer: NodeJS.Timeout | null = null;
  /** Submits written so far (each gets the next number), and the highest number the SMSC took. */
  #submitted = 0;
  #lastTaken = 0;
  readonly #throttleLogged = new LogThrottle();
  #listeners: ReceiptListener[] = [];
  /** Connection trouble logged since the last bind, and when (#newTrouble). */
  readonly #troubleLogged = new LogThrottle();

  /** `bindAs` is for the transport itself: a pair's transmitter makes its receiver with it. */
  constructor(options: SmppTransportOptions, bindAs?: BindAs) {
    const bind = options.bind ?? 'transceiver';
    if (bind !== 'transceiver' && bind !== 'pair') throw new Error(`SmppTransport bind must be transceiver or pair (got ${String(bind)})`);
    this.#bindAs = bindAs ?? (bind === 'pair' ? 'transmitter' : 'transceiver');
    this.#receiver = this.#bindAs === 'transmitter' ? new SmppTransport(options, 'receiver') : null;
    this.#server = parseSmppUrl(options.url);
    this.target = describeSmppUrl(this.#server);
    const source = options.sourceAddr ?? 'LIPA';
    const numeric = /^\+?[0-9]{1,20}$/.test(source);
    if (!isSmppSourceAddr(source))
      throw new Error(`SMPP source address must be digits or 1-11 printable ASCII characters (got "${source}")`);
    this.#sourceAddr = numeric ? source.replace(/^\+/, '') : source;
    // Digits alone, at most 8 and without a plus, are a short code (e.g. 22555): it is no
    // international number (+22555 would be Côte d'Ivoire's 225 and "55"), so it goes as a
    // network-specific number. Longer digits are an international number, letters alphanumeric.
    const shortCode = /^[0-9]{1,8}$/.test(source);
    this.#sourceTon = options.sourceAddrTon ?? (shortCode ? TON_NETWORK_SPECIFIC : numeric ? TON_INTERNATIONAL : TON_ALPHANUMERIC);
    this.#sourceNpi = options.sourceAddrNpi ?? (numeric && !shortCode ? NPI_ISDN : NPI_UNKNOWN);
    this.#systemType = options.systemType ?? '';
    this.#enquireLinkMs = positive('enquireLinkMs', options.enquireLinkMs, 30_000);
    this.#bindWaitMs = positive('bindWaitMs', options.bindWaitMs, 5_000);
    this.#responseTimeoutMs = positive('responseTimeoutMs', options.responseTimeoutMs, 10_000);
    this.#submitTimeoutMs = positive('submitTimeoutMs', options.submitTimeoutMs, 120_000);
    this.#connectTimeoutMs = positive('connectTimeoutMs', options.connectTimeoutMs, 10_000);
    this.#reconnectMinMs = positive('reconnectMinMs', options.reconnectMinMs, 500);
    // At most 10 s between tries: once an SMSC is back, login codes wait for the next one.
    this.#reconnectMaxMs = Math.max(this.#reconnectMinMs, positive('reconnectMaxMs', options.reconnectMaxMs, 10_000));
    this.#windowSize = positive('windowSize', options.windowSize, 1000);
    this.#messageIdType = options.messageIdType;
    this.#spacingMs =
      options.maxSubmitsPerSecond === undefined ? 0 : 1000 / positive('maxSubmitsPerSecond', options.maxSubmitsPerSecond, 1);
    this.#throttlePauseMs = positive('throttlePauseMs', options.throttlePauseMs, 1_000);
    this.#throttleRetryMs = positive('throttleRetryMs', options.throttleRetryMs, SLOT_WAIT_MS);
    this.#tlsOptions = options.tlsOptions ?? {};
    // The two binds of a pair log as which they are.
    this.#log = options.logger && bind === 'pair' ? labelled(options.logger, this.#bindAs) : options.logger;
  }

  /** Whether no submit_sm may go right now: the SMSC throttled the bind, or the throughput limit spaces them. */
  get paused(): boolean {
    return this.#gateAt > performance.now();
  }

  /** Whether the bind that submits (transceiver or transmitter) is up right now. */
  get bound(): boolean {
    return this.#bound;
  }

  /** Whether the bind that takes receipts (the transceiver, or the receiver of a pair) is up right now. */
  get receiving(): boolean {
    return this.#receiver === null ? this.#bound : this.#receiver.bound;
  }

  /** Each bind and whether it is up: the transceiver, or the pair's transmitter and receiver. */
  binds(): Record<string, boolean> {
    return this.#receiver === null ? { [this.#bindAs]: this.#bound } : { transmitter: this.#bound, receiver: this.#receiver.bound };
  }

  /** Submits awaiting their submit_sm_resp. */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** Connects and binds in the background (send() does this too); idempotent. */
  start(): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    this.#connect();
    this.#receiver?.start();
  }

  /** Resolves once bound; TransientSendError after `timeoutMs` or when the SMSC refuses the bind. */
  async ready(timeoutMs = this.#bindWaitMs): Promise<void> {
    this.start();
    await this.#waitForBind(timeoutMs, timeoutMs);
  }

  onReceipt(listener: ReceiptListener): void {
    // A transmitter bind takes no deliver_sm: the receipts come on the receiver.
    (this.#receiver ?? this).#listeners.push(listener);
  }

  async send(message: OutboundSms): Promise<SendResult> {
    if (this.#bindAs === 'receiver') throw new Error('an SMPP receiver bind does not submit');
    const destination = `${message.countryCode}${message.number}`;
    if (!/^[0-9]{1,20}$/.test(destination)) {
      throw new PermanentSendError(
        'SMS destination must be 1-20 digits (country code and number)',
        'Not sent: the number must be 1 to 20 digits, country code included.',
      );
    }
    const params = this.#submitParams(message.content, destination);
    this.start();
    // However often it waits (for the bind, a window place, the gate, after a throttle), a
    // send gives up unsent after SLOT_WAIT_MS in all (well inside the messenger's leases), or
    // once the message is no longer worth sending.
    const started = performance.now();
    const budget = waitBudget(message.notAfter, SLOT_WAIT_MS);
    const giveUpAt = started + budget.ms;
    // Once throttled: the number of that submit_sm. If the SMSC then takes a submit written
    // after it, it refuses this number, not the bind (throttling by rate refuses all that come
    // after too): it goes back to the worker, retried with back-off, holding up nobody.
    let throttledAs: ThrottledSendError | null = null;
    let place = this.#slotWaiters.place(message.first === true);
    let bindDeadline: number | null = null;
    let woken = false;
    const inLine = async (why: string): Promise<void> => {
      woken = false;
      const how = await this.#slotWaiters.wait(message.urgent, giveUpAt - performance.now(), place);
      if (how === 'timeout') throw new TransientSendError(`${why} of ${this.target} ${budget.ranOut}`);
      woken = how === 'handed';
      bindDeadline = null;
    };
    try {
      for (;;) {
        if (this.#closed) throw new TransportClosedError('SMPP transport');
        const session = this.#session;
        if (!this.#bound || session === null) {
          // A bind is waited for bindWaitMs from when this send found the link down.
          bindDeadline ??= Date.now() + Math.min(this.#bindWaitMs, giveUpAt - performance.now());
          await this.#waitForBind(bindDeadline - Date.now(), this.#bindWaitMs);
          continue;
        }
        if (this.#pending.size >= this.#windowSize) {
          await inLine('no free place in the SMPP window');
          continue;
        }
        if (!woken && this.#slotWaiters.ahead(message.urgent, place)) {
          // Others wait for their turn (the gate may have opened before its timer fired): in
          // line behind them, making sure the first of them is on its way.
          this.#nudge();
          await inLine('no turn on the bind');
          continue;
        }
        const hold = this.#gateAt - performance.now();
        if (hold > 0) {
          // Paused (throttled) or paced: in line, the service's own messages first, until the gate opens.
          this.#openGateIn(hold);
          await inLine('no turn (throttled or paced) on the bind');
          continue;
        }
        if (throttledAs !== null && this.#lastTaken > throttledAs.submitNumber) throw throttledAs;
        this.#passGate();
        woken = false;
        bindDeadline = null;
        try {
          return await this.#submit(session, params);
        } catch (error) {
          if (!(error instanceof ThrottledSendError) || performance.now() >= Math.min(giveUpAt, started + this.#throttleRetryMs))
            throw error;
          // The bind pauses and it waits: the first time in its place, after that (or when its
          // last try was throttled too) at the back of its lane, so that the others show
          // whether the SMSC takes anything.
          if (throttledAs !== null || message.throttledBefore === true) place = this.#slotWaiters.place(message.first === true);
          throttledAs = error;
        }
      }
    } catch (error) {
      // This send was handed a free slot it will not use: hand it to the next in line.
      if (woken) this.#slotWaiters.wake();
      throw error;
    }
  }

  /** A submit goes now: with a throughput limit, the next may go one spacing later. */
  #passGate(): void {
    if (this.#spacingMs === 0) return;
    this.#gateAt = Math.max(this.#gateAt, performance.now()) + this.#spacingMs;
    if (this.#slotWaiters.size > 0) this.#openGateIn(this.#spacingMs);
  }

  /** Wakes those in line once the gate opens; one timer at a time (the gate only moves forward, so it never fires late). */
  #openGateIn(ms: number): void {
    if (this.#gateTimer !== null || this.#closed) return;
    this.#gateTimer = setTimeout(() => {
      this.#gateTimer = null;
      const hold = this.#gateAt - performance.now();
      if (hold > 0) this.#openGateIn(hold);
      // Paced, the gate lets one through; after a pause, everyone looks (the window still bounds them).
      else if (this.#spacingMs > 0) this.#slotWaiters.wake();
      else this.#slotWaiters.wakeAll();
    }, Math.ceil(ms));
  }

  /** The SMSC throttled a submit: nothing more goes on this bind for the pause. */
  #pause(status: number): void {
    this.#gateAt = Math.max(this.#gateAt, performance.now() + this.#throttlePauseMs);
    const text = `SMSC ${this.target} is throttling: ${describeStatus(status)}`;
    if (this.#throttleLogged.due(text)) {
      this.#log?.warn({ smsc: this.target, commandStatus: status, pauseMs: this.#throttlePauseMs }, `${text}; submits pause and resume`);
    }
  }

  async close(): Promise<void> {
    // The receiver last: receipts for the submits still answered during the stop can arrive.
    this.#closing ??= this.#shutdown().finally(() => this.#receiver?.close());
    return this.#closing;
  }

  #submitParams(content: string, destination: string): Record<string, unknown> {
    const { encoding, segments } = countSegments(content);
    const body = encoding === 'gsm7' ? encodeGsm7(content) : encodeUcs2(content);
    return {
      source_addr_ton: this.#sourceTon,
      source_addr_npi: this.#sourceNpi,
      source_addr: this.#sourceAddr,
      dest_addr_ton: TON_INTERNATIONAL,
      dest_addr_npi: NPI_ISDN,
      destination_addr: destination,
      registered_delivery: 1,
      data_coding: encoding === 'gsm7' ? DATA_CODING_GSM : DATA_CODING_UCS2,
      ...(segments === 1 ? { short_message: body } : { short_message: Buffer.alloc(0), message_payload: body }),
    };
  }

  /** One submit_sm. An ESME_RTHROTTLED answer pauses the bind (#pause). */
  #submit(session: smpp.Session, params: Record<string, unknown>): Promise<SendResult> {
    return new Promise<SendResult>((resolve, reject) => {
      let done = false;
      const finish = (error: Error | null, result?: SendResult) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.#pending.delete(pending);
        this.#releaseSlot();
        if (error) reject(error);
        else if (result) resolve(result);
      };
      const pending: Pending = { fail: (error) => finish(error) };
      const pdu = new smpp.PDU('submit_sm', params);
      const submittedAt = Date.now();
      const submitNumber = ++this.#submitted;
      const timer = setTimeout(() => {
        // Forget the response callback the package keeps per sequence number.
        delete session._callbacks?.[pdu.sequence_number];
        finish(new TransientSendError(`no submit_sm_resp from ${this.target} within ${this.#submitTimeoutMs} ms`));
      }, this.#submitTimeoutMs);
      this.#pending.add(pending);
      this.#cork(session);
      const written = session.send(pdu, (resp) => {
        if (resp.command_status === STATUS.ok) {
          const id = typeof resp.message_id === 'string' && resp.message_id !== '' ? this.#messageId(resp.message_id, 0b01) : null;
          this.#lastTaken = Math.max(this.#lastTaken, submitNumber);
          finish(null, { status: 'sent', providerId: id, submittedAt });
          return;
        }
        if (resp.command_status === STATUS.invalidBindStatus && this.#session === session) {
          // The SMSC no longer sees us as bound: start over.
          this.#lastError = 'SMSC answered ESME_RINVBNDSTS';
          session.destroy();
        }
        const error = submitError(resp.command_status);
        if (error instanceof ThrottledSendError) {
          error.submitNumber = submitNumber;
          this.#pause(resp.command_status);
        }
        finish(error);
      });
      if (!written) finish(new TransientSendError(`SMPP connection to ${this.target} is not writable`));
    });
  }

  /** An id from the SMSC as it is kept: as written, or canonical when SMPP_MSG_ID_TYPE says how the SMSC writes it. */
  #messageId(id: string, hexBit: number): string {
    return this.#messageIdType === undefined ? id : canonicalMessageId(id, (this.#messageIdType & hexBit) !== 0);
  }

  /** Batches the PDUs written in one turn of the event loop into few socket writes. */
  #cork(session: smpp.Session): void {
    if (this.#corked) return;
    this.#corked = true;
    session.socket.cork();
    setImmediate(() => {
      this.#corked = false;
      session.socket.uncork();
    });
  }

  #releaseSlot(): void {
    this.#nudge();
    if (this.#pending.size === 0) for (const idle of this.#idleWaiters.splice(0)) idle();
  }

  /** Hands the first in line its turn: now, or when the gate opens (#openGateIn) while it is shut. */
  #nudge(): void {
    const hold = this.#gateAt - performance.now();
    if (hold > 0) this.#openGateIn(hold);
    else this.#slotWaiters.wake();
  }

  /** `budgetMs`: the whole wait the caller allowed, for the message. */
  #waitForBind(timeoutMs: number, budgetMs: number): Promise<void> {
    if (this.#bound) return Promise.resolve();
    if (this.#bindRefused !== null) return Promise.reject(new TransientSendError(this.#bindRefused));
    if (this.#closed) return Promise.reject(new TransportClosedError('SMPP transport'));
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(
          () => {
            this.#bindWaiters.delete(waiter);
            const last = this.#lastError ? ` (last error: ${this.#lastError})` : '';
            reject(new TransientSendError(`not bound to SMSC ${this.target} after ${budgetMs} ms${last}`));
          },
          Math.max(0, timeoutMs),
        ),
      };
      this.#bindWaiters.add(waiter);
    });
  }

  #settleBindWaiters(error: Error | null): void {
    for (const waiter of this.#bindWaiters) {
      clearTimeout(waiter.timer);
      if (error) waiter.reject(error);
      else waiter.resolve();
    }
    this.#bindWaiters.clear();
  }

  #connect(): void {
    this.#reconnectTimer = null;
    if (this.#closed) return;
    const { host, port, tls } = this.#server;
    const session = smpp.connect({ ...(tls ? this.#tlsOptions : {}), host, port, tls });
    this.#session = session;
    const connectTimer = setTimeout(() => {
      this.#lastError = `no connection within ${this.#connectTimeoutMs} ms`;
      session.destroy();
    }, this.#connectTimeoutMs);
    session.once(tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(connectTimer);
      session.socket.setNoDelay(true);
      this.#bind(session);
    });
    session.on('error', (error: Error) => {
      // Also a malformed PDU, after which the package stops reading: start over either way.
      this.#lastError = error.message;
      if (this.#newTrouble(error.message)) this.#log?.warn({ smsc: this.target, err: error.message }, 'SMPP connection error');
      session.destroy();
    });
    session.on('close', () => {
      clearTimeout(connectTimer);
      this.#onClose(session);
    });
    session.on('pdu', (pdu: smpp.PDU) => this.#onPdu(session, pdu));
  }

  #bind(session: smpp.Session): void {
    const timer = setTimeout(() => {
      this.#lastError = `no bind_${this.#bindAs}_resp within ${this.#responseTimeoutMs} ms`;
      session.destroy();
    }, this.#responseTimeoutMs);
    session[`bind_${this.#bindAs}`](
      {
        system_id: this.#server.systemId,
        password: this.#server.password,
        system_type: this.#systemType,
        interface_version: 0x34,
      },
      (resp) => {
        clearTimeout(timer);
        if (this.#session !== session) return;
        if (resp.command_status !== STATUS.ok) {
          const reason = `SMSC ${this.target} refused bind_${this.#bindAs} for system_id "${this.#server.systemId}": ${describeStatus(resp.command_status)}`;
          this.#lastError = reason;
          this.#bindRefused = reason;
          if (this.#newTrouble(reason)) this.#log?.error({ smsc: this.target, commandStatus: resp.command_status }, reason);
          this.#settleBindWaiters(new TransientSendError(reason));
          session.destroy();
          return;
        }
        this.#bound = true;
        this.#bindRefused = null;
        this.#lastError = null;
        this.#failedAttempts = 0;
        this.#troubleLogged.clear();
        this.#log?.info({ smsc: this.target }, `SMPP bound as ${this.#bindAs}`);
        this.#startEnquireLink(session);
        this.#settleBindWaiters(null);
        // Sends queued for a slot while the link was down look again.
        this.#slotWaiters.wakeAll();
      },
    );
  }

  #startEnquireLink(session: smpp.Session): void {
    this.#enquireTimer = setInterval(() => {
      if (this.#session !== session || !this.#bound) return;
      const timer = setTimeout(() => {
        if (this.#session !== session) return;
        this.#lastError = `no enquire_link_resp within ${this.#responseTimeoutMs} ms`;
        this.#log?.warn({ smsc: this.target }, 'SMPP link dead (enquire_link unanswered); reconnecting');
        session.destroy();
      }, this.#responseTimeoutMs);
      const written = session.enquire_link({}, () => clearTimeout(timer));
      if (!written) clearTimeout(timer);
    }, this.#enquireLinkMs);
  }

  #onClose(session: smpp.Session): void {
    if (this.#session !== session) return;
    this.#session = null;
    const wasBound = this.#bound || this.#unboundBySmsc;
    const unbound = this.#unboundBySmsc;
    this.#bound = false;
    this.#unboundBySmsc = false;
    if (this.#enquireTimer) clearInterval(this.#enquireTimer);
    this.#enquireTimer = null;
    const lost = new TransientSendError(
      `SMPP connection to ${this.target} closed before submit_sm_resp (the SMSC may have accepted the message)`,
    );
    for (const pending of [...this.#pending]) pending.fail(lost);
    if (this.#closed) return;
    if (!wasBound && this.#bindRefused === null) this.#lastError ??= 'connection closed before the bind completed';
    // A refused bind (a wrong password) is retried at most every 30 s: some SMSCs lock an
    // account after repeated failed binds. ±20 % jitter keeps instances from retrying together.
    const max = this.#bindRefused === null ? this.#reconnectMaxMs : Math.max(this.#reconnectMaxMs, 30_000);
    const delay = backoffMs(this.#reconnectMinMs, this.#failedAttempts + 1, max);
    this.#failedAttempts = Math.min(this.#failedAttempts + 1, 30);
    if (wasBound || this.#newTrouble(`retrying: ${this.#lastError}`)) {
      this.#log?.warn(
        { smsc: this.target, wasBound, reconnectInMs: delay, lastError: this.#lastError },
        unbound
          ? 'SMPP unbound by the SMSC; binding again'
          : wasBound
            ? 'SMPP connection lost; reconnecting'
            : 'SMPP connection failed; retrying',
      );
    }
    this.#reconnectTimer = setTimeout(() => this.#connect(), delay);
  }

  /**
   * Whether this trouble is worth a log line: a new one, or the same again a minute after it
   * was last logged. An SMSC refusing the bind (a wrong password) or unreachable is retried
   * every 10 s (30 s for a refused bind) for as long as it lasts; the log says so once a minute, not each time.
   */
  #newTrouble(text: string): boolean {
    return this.#troubleLogged.due(text);
  }

  #onPdu(session: smpp.Session, pdu: smpp.PDU): void {
    if (pdu.isResponse()) return; // matched to its request by the package
    try {
      switch (pdu.command) {
        case 'deliver_sm':
          this.#onDeliverSm(session, pdu);
          return;
        case 'enquire_link':
          session.send(pdu.response());
          return;
        case 'unbind':
          // The SMSC is closing the bind: answer, let the connection close, and bind again.
          this.#bound = false;
          this.#unboundBySmsc = true;
          this.#lastError = 'the SMSC sent unbind';
          session.send(pdu.response());
          session.close();
          return;
        case 'alert_notification':
        case 'outbind':
          return; // no response is defined
        default:
          session.send(pdu.response({ command_status: STATUS.invalidCommand }));
      }
    } catch (error) {
      this.#log?.error({ smsc: this.target, command: pdu.command, err: (error as Error).message }, 'SMPP request not handled');
    }
  }

  #onDeliverSm(session: smpp.Session, pdu: smpp.PDU): void {
    const receipt = parseDeliveryReceipt(pdu);
    if (receipt === null) {
      this.#log?.debug({ smsc: this.target }, 'SMPP deliver_sm that is not a receipt (mobile-originated SMS) ignored');
      session.send(pdu.response());
      return;
    }
    if (!receipt.final) {
      session.send(pdu.response());
      return;
    }
    const { final: _final, ...delivery } = receipt;
    // As Kannel reads it: receipted_message_id, else the text's id:, in the receipts' form.
    delivery.providerId = this.#messageId(delivery.providerId, 0b10);
    const results: unknown[] = [];
    let failed = false;
    for (const listener of (this.#receiver ?? this).#listeners) {
      try {
        results.push(listener(delivery));
      } catch (error) {
        failed = true;
        this.#log?.error({ smsc: this.target, providerId: delivery.providerId, err: (error as Error).message }, 'receipt listener failed');
      }
    }
    const thenables = results.filter((r): r is PromiseLike<unknown> => typeof (r as PromiseLike<unknown>)?.then === 'function');
    const answer = (ok: boolean) => {
      this.#cork(session);
      session.send(pdu.response(ok ? {} : { command_status: STATUS.temporaryAppError }));
    };
    if (thenables.length === 0) {
      answer(!failed);
      return;
    }
    void Promise.allSettled(thenables).then((settled) => {
      const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (rejected) {
        this.#log?.error(
          { smsc: this.target, providerId: delivery.providerId, err: String((rejected.reason as Error)?.message ?? rejected.reason) },
          'receipt listener failed; the SMSC will send the receipt again',
        );
      }
      answer(!failed && !rejected);
    });
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    if (this.#reconnectTimer) clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = null;
    if (this.#gateTimer) clearTimeout(this.#gateTimer);
    this.#gateTimer = null;
    this.#settleBindWaiters(new TransportClosedError('SMPP transport'));
    this.#slotWaiters.wakeAll();
    const session = this.#session;
    if (session === null) return;
    const closed = new Promise<void>((resolve) => session.once('close', () => resolve()));
    if (this.#bound) {
      // Let submits on the wire get their answers, then unbind politely.
      if (this.#pending.size > 0) {
        // Each has its own submit timeout: waited for as long as a send would be, so that none
        // the SMSC may still take is failed, and sent again, by the stop itself.
        await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
      }
      await raceTimeout(
        new Promise<void>((resolve) => {
          if (!session.unbind({}, () => resolve())) resolve();
        }),
        Math.min(this.#responseTimeoutMs, 2_000),
      );
      session.close();
      await raceTimeout(closed, 1_000);
    }
    session.destroy();
    await closed;
    if (this.#enquireTimer) clearInterval(this.#enquireTimer);
    this.#enquireTimer = null;
    this.#log?.info({ smsc: this.target }, 'SMPP transport closed');
  }
}

function labelled(log: SmppLogger, bind: BindAs): SmppLogger {
  return {
    debug: (obj, msg) => log.debug({ ...obj, bind }, msg),
    info: (obj, msg) => log.info({ ...obj, bind }, msg),
    warn: (obj, msg) => log.warn({ ...obj, bind }, msg),
    error: (obj, msg) => log.error({ ...obj, bind }, msg),
  };
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new Error(`SmppTransport ${name} must be a positive number (got ${value})`);
  return value;
}

/** Resolves when `promise` does or after `ms`, whichever is first. */
function raceTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer));
}
