import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { claimingRead, type Db, type Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import { OutageRecorder } from '../db/record-retry.js';
import type { MessageStatus, MessageTable } from '../db/schema.js';
import { backoffMs } from '../jobs/backoff.js';
import { LogThrottle } from '../logger.js';
import type { Notifier, OutgoingMessage } from '../notifier/notifier.js';
import { splitPhone } from '../notifier/notifier.js';
import { countMessageStatus } from '../ops/counters.js';
import type { SecretBox } from '../security/secret-box.js';
import { randomId } from '../security/tokens.js';
import { hideCodes, holdsCode, readText, storedText } from './login-codes.js';
import { Receipts } from './receipts.js';
import { countSegments } from './sms-segments.js';
import {
  type EmailTransport,
  PermanentSendError,
  type SendResult,
  type SmsTransport,
  TransientSendError,
  TransportClosedError,
} from './transports/transport.js';

/** Transports of a process; null means the embedded outbox delivers that type. */
export interface Transports {
  email: EmailTransport | null;
  sms: SmsTransport | null;
}

/** The SMSC or the mail server, as the sender reads of it. */
const serverOf = (type: MessageTable['type']): string => (type === 'sms' ? 'the SMS centre' : 'the mail server');

/** The longest wait between two tries of a message. */
const MAX_RETRY_DELAY_MS = 10 * 60_000;
/**
 * A message being sent is leased; if the sender dies, the lease ends and it is tried again.
 * While a send is under way its lease is renewed every third of it, however long the send
 * takes (a slow mail server), so no other worker sends it meanwhile.
 */
const LEASE_MS = 30_000;
/**
 * A send still open after this long is left to its lease (and retried). Longer than any
 * transport's own limit: SMTP waits up to 10 minutes for a reply (RFC 5321), SMPP 2 minutes.
 */
const MAX_SEND_MS = 15 * 60_000;
const MAX_IN_FLIGHT = 512;
/** The service's own messages claimed a tick (10 ticks a second), on top of MAX_IN_FLIGHT. */
const OWN_PER_TICK = 64;

/**
 * Queued login codes due at `now`, oldest first, but those in `busy`: in their own small index
 * (messages_due_codes; the status and purpose written out, so that the planners see it fits).
 */
export function dueLoginCodes(db: Tx, now: number, busy: readonly string[], limit: number) {
  return db
    .selectFrom('messages')
    .select('id')
    .where('status', '=', sql.lit('queued'))
    .where('purpose', '=', sql.lit('otp'))
    .where('next_attempt_at', '<=', now)
    .where('locked_until', '<=', now)
    .$if(busy.length > 0, (query) => query.where('id', 'not in', [...busy]))
    .orderBy('next_attempt_at')
    .limit(limit);
}

export type NewMessage = Omit<
  MessageTable,
  | 'id'
  | 'status'
  | 'created_at'
  | 'updated_at'
  | 'provider_id'
  | 'attempts'
  | 'next_attempt_at'
  | 'locked_until'
  | 'last_error'
  | 'failure_reason'
>;

/** What an attempt writes on its message's row. */
type AttemptRecord = Pick<
  MessageTable,
  'status' | 'provider_id' | 'attempts' | 'next_attempt_at' | 'locked_until' | 'last_error' | 'failure_reason' | 'content' | 'updated_at'
>;

/** The outcome of one attempt, as the API's first-attempt answer needs it. */
export interface Attempted {
  status: MessageStatus;
  /** The server refused the recipient's address itself (an email's `500` answer). */
  invalidRecipient: boolean;
}

/**
 * The messaging subsystem's engine: every message (API or the service's own OTPs and
 * prompts) is stored before it is sent, then handed to its transport; outcomes, retries
 * and delivery receipts are recorded on the row. With no SMTP/SMPP configured, storing is
 * delivering (the embedded outbox).
 */
export class Messenger implements Notifier {
  private inFlight = 0;
  private readonly running = new Set<Promise<Attempted>>();
  /** Transient failures last logged, by type and text, and when (warnRetrying). */
  private readonly warned: LogThrottle;
  /** Messages on the wire (each holding its current lease) and when their send began: renewLeases() extends them. */
  private readonly sending = new Map<MessageTable, number>();
  private readonly renewTimer: NodeJS.Timeout | null;
  private renewal: Promise<void> = Promise.resolve();
  private renewing = false;
  /** Records attempts through a database outage; the messages it holds are not claimed again here meanwhile. */
  private readonly recorder: OutageRecorder;
  /** Delivery receipts of SMS: recorded, or kept until their submission is (receipts.ts). */
  private readonly receipts: Receipts;

  constructor(
    private readonly store: Db,
    private readonly log: FastifyBaseLogger,
    readonly transports: Transports,
    /** Seals login codes at rest (login-codes.ts). */
    private readonly box: SecretBox,
    private readonly now: () => number = Date.now,
    /** How long after it was stored a message is still worth trying (a login code, a prompt: as long as they are valid). */
    private readonly retryWindowMs: (purpose: string) => number = () => 86_400_000,
    /** A send's lease (tests shorten it). */
    private readonly leaseMs = LEASE_MS,
  ) {
    this.receipts = new Receipts(store, now);
    this.warned = new LogThrottle(now);
    this.recorder = new OutageRecorder(log, 'message attempts');
    // The receipt is acknowledged to the SMSC only once it is recorded.
    transports.sms?.onReceipt((receipt) => this.receipts.apply(receipt));
    // Bound from the start: receipts the SMSC holds for messages sent before a restart come in,
    // and lipa_smpp_bound tells the truth before the first send.
    transports.sms?.start?.();
    // Only real transports have sends under way to renew.
    this.renewTimer = transports.email || transports.sms ? setInterval(() => void this.renewLeases(), this.leaseMs / 3).unref() : null;
  }

  /** Whether messages of this type are delivered by storing them (no real transport). */
  embedded(type: 'email' | 'sms'): boolean {
    return this.transports[type] === null;
  }

  /**
   * Stores a message in the caller's transaction. Embedded: it is delivered there and then.
   * Otherwise it is queued; `claimed` leases it to the caller, who sends it right after the
   * commit (sendClaimed), so the API's first attempt needs no extra write to claim it.
   */
  async enqueue(tx: Tx, message: NewMessage, now: number, claimed: boolean): Promise<MessageTable> {
    const embedded = this.embedded(message.type);
    const id = randomId('msg_');
    const row: MessageTable = {
      id,
      ...message,
      content: storedText(this.box, message.purpose, id, message.content),
      status: embedded ? 'delivered' : 'queued',
      created_at: now,
      updated_at: now,
      provider_id: null,
      attempts: 0,
      next_attempt_at: now,
      locked_until: claimed && !embedded ? now + this.leaseMs : 0,
      last_error: null,
      failure_reason: null,
    };
    await hotQuery(tx, 'messages.insert', Object.values(row), () => tx.insertInto('messages').values(row));
    if (embedded) countMessageStatus(tx, row.type, 'delivered');
    return row;
  }

  /** The Notifier port: the service's own messages (OTPs, payment prompts). */
  async send(tx: Tx, message: OutgoingMessage, now: number): Promise<string> {
    const phone = message.channel === 'sms' ? splitPhone(message.to) : null;
    const row = await this.enqueue(
      tx,
      {
        merchant_id: null,
        messaging_key_id: null,
        purpose: message.purpose,
        type: message.channel,
        email: message.channel === 'email' ? message.to : null,
        subject: message.channel === 'email' ? message.subject : null,
        content_type: message.channel === 'email' ? 'text' : null,
        phone_country_code: phone?.countryCode ?? null,
        phone_number: phone?.number ?? null,
        content: message.text,
        segments: message.channel === 'sms' ? countSegments(message.text).segments : null,
      },
      now,
      false,
    );
    return row.id;
  }

  /**
   * Sends a message this process holds the lease of; resolves with its status after the
   * attempt, and whether the server refused the recipient's address itself.
   */
  async sendClaimed(message: MessageTable): Promise<Attempted> {
    this.inFlight++;
    const attempt = this.attempt(message);
    this.running.add(attempt);
    try {
      return await attempt;
    } finally {
      this.running.delete(attempt);
      this.inFlight--;
    }
  }

  /**
   * The worker: claims due queued messages and sends them, without waiting for slow ones.
   * The service's own messages (login codes, payment prompts) are claimed first, and however
   * many merchants' messages are under way: somebody is waiting for each, and they are few.
   */
  async deliverDue(): Promise<number> {
    if (this.transports.email === null && this.transports.sms === null) return 0;
    const room = MAX_IN_FLIGHT - this.inFlight;
    const now = this.now();
    // This process's own sends and records whose leases ran out while the database was away
    // (renewing failed): still under way here, so not due again (another instance may not know).
    const busy = [...this.recorder.waiting];
    for (const [message, since] of this.sending) if (message.locked_until <= now && now - since < MAX_SEND_MS) busy.push(message.id);
    const claimed = await this.store.write(async (tx) => {
      const due = (own: boolean, limit: number) => {
        // Own messages have their own small index (messages_due_own), whatever the backlog;
        // the planners see it fits only when the status is written out, not a parameter.
        let query = tx
          .selectFrom('messages')
          .select('id')
          .where('status', '=', own ? sql.lit('queued') : 'queued')
          .where('next_attempt_at', '<=', now)
          .where('locked_until', '<=', now);
        if (own) query = query.where('merchant_id', 'is', null);
        if (busy.length > 0) query = query.where('id', 'not in', busy);
        return claimingRead(this.store.dialect, query.orderBy('next_attempt_at').limit(limit)).execute();
      };
      // Login codes before the service's other messages (their own small index): a flood of
      // payment prompts, which a merchant can cause, does not hold up anybody's sign-in.
      const codes = await claimingRead(this.store.dialect, dueLoginCodes(tx, now, busy, OWN_PER_TICK)).execute();
      const ids = new Set(codes.map((d) => d.id));
      for (const d of await due(true, OWN_PER_TICK)) ids.add(d.id);
      if (room > ids.size) for (const d of await due(false, Math.min(room - ids.size, 256))) ids.add(d.id);
      if (ids.size === 0) return [];
      return tx
        .updateTable('messages')
        .set({ locked_until: now + this.leaseMs })
        .where('id', 'in', [...ids])
        .where('status', '=', 'queued')
        .where('locked_until', '<=', now)
        .returningAll()
        .execute();
    });
    // Login codes, then the service's other messages, first: the transports take sends in the
    // order given, within their lanes.
    const rank = (m: MessageTable) => (holdsCode(m.purpose) ? 0 : m.merchant_id === null ? 1 : 2);
    claimed.sort((a, b) => rank(a) - rank(b));
    for (const message of claimed) {
      void this.sendClaimed(message).catch((err: unknown) =>
        this.log.error({ err, messageId: message.id }, 'message attempt not recorded'),
      );
    }
    return claimed.length;
  }

  private async attempt(message: MessageTable): Promise<Attempted> {
    let result: SendResult | null = null;
    let error: Error | null = null;
    const sentAt = this.now();
    this.sending.set(message, sentAt);
    try {
      result = await this.transmit(message);
    } catch (caught) {
      error = caught as Error;
    } finally {
      // From the send's end until its record settles, the message stays this process's
      // (the recorder releases it), however long the record takes.
      this.recorder.waiting.add(message.id);
      this.sending.delete(message);
    }
    try {
      return await this.settle(message, result, error, sentAt);
    } finally {
      this.recorder.waiting.delete(message.id);
    }
  }

  /** Records an attempt's outcome (its result or error, the send begun at `sentAt`) and says what it was. */
  private async settle(message: MessageTable, result: SendResult | null, error: Error | null, sentAt: number): Promise<Attempted> {
    // A renewal under way may still move this lease: record the outcome under the one it leaves.
    await this.renewal;
    const now = this.now();
    // Refused by a transport that is stopping, this was no try: the message stays as it was.
    const untried = error instanceof TransportClosedError;
    const attempts = untried ? message.attempts : message.attempts + 1;
    let status: MessageStatus;
    let next = now;
    let lastError = untried ? message.last_error : (error?.message ?? null);
    let failureReason: string | null = null;
    if (result) {
      status = result.status;
    } else if (untried) {
      status = 'queued';
    } else if (error instanceof PermanentSendError) {
      status = 'failed';
      failureReason = error.reason ?? `Refused by ${serverOf(message.type)}.`;
    } else {
      if (!(error instanceof TransientSendError)) this.log.error({ err: error, messageId: message.id }, 'message send failed unexpectedly');
      else this.warnRetrying(message, error);
      // A transient failure (the server down, busy or throttling) is retried for as long as the
      // message is worth sending, however many tries that takes: an outage loses nothing.
      // The last try is at the window's end.
      const window = this.retryWindowMs(message.purpose);
      const deadline = message.created_at + window;
      next = Math.min(now + backoffMs(2000, attempts, MAX_RETRY_DELAY_MS), deadline);
      status = now < deadline ? 'queued' : 'failed';
      if (status === 'failed') {
        lastError = `gave up after ${attempts} tries in ${Math.round(window / 1000)} s; the last: ${lastError}`;
        failureReason = `Not sent: ${serverOf(message.type)} could not be reached or would not take it for as long as the message was worth sending.`;
      }
    }
    const recorded = await this.recordAttempt(message, result?.submittedAt ?? sentAt, {
      status,
      provider_id: result?.providerId ?? null,
      attempts,
      next_attempt_at: next,
      locked_until: 0,
      last_error: lastError,
      failure_reason: failureReason,
      content: this.redactedAfterSend(message, status),
      updated_at: now,
    });
    if (!recorded) {
      // The lease ran out first (this process stalled): whoever holds it now sets the state.
      this.log.warn({ messageId: message.id, status }, 'message attempt not recorded: its lease had run out');
    }
    // A receipt kept from before the submit itself (a throttled send waits) is not this one's.
    const early = result?.providerId ? await this.receipts.overtaken(result.providerId, result.submittedAt ?? sentAt) : undefined;
    if (early) {
      await this.receipts.applyKept(early.receipt, message.id, early.at);
      return { status: early.receipt.delivered ? 'delivered' : 'failed', invalidRecipient: false };
    }
    return { status, invalidRecipient: error instanceof PermanentSendError && error.invalidRecipient };
  }

  /**
   * Writes an attempt's outcome, only while this process still holds the lease it sent under;
   * false when the lease had run out. The server has its answer: a database outage must not
   * lose it (the lease would run out and the message go out again), so the record is tried
   * until the database is back, and this process's worker leaves the message alone meanwhile
   * (another instance may not, once the database is back, if the outage outlasted the lease).
   */
  private recordAttempt(message: MessageTable, submittedAt: number, outcome: AttemptRecord): Promise<boolean> {
    return this.recorder.record(message.id, (tries) =>
      this.store.write(async (tx) => {
        // The SET's parameters are the outcome's values, in its order (hotQuery checks it).
        const params = [...Object.values(outcome), message.id, message.locked_until];
        const updated = await hotQuery(tx, 'messages.record-attempt', params, () =>
          tx.updateTable('messages').set(outcome).where('id', '=', message.id).where('locked_until', '=', message.locked_until),
        );
        if (Number(updated.numAffectedRows ?? 0n) > 0) {
          if (outcome.status !== 'queued') countMessageStatus(tx, message.type, outcome.status);
          if (message.type === 'sms' && outcome.provider_id !== null)
            await this.receipts.forgetBefore(tx, outcome.provider_id, submittedAt);
          return true;
        }
        if (tries === 0) return false;
        // An earlier try whose commit's answer was lost may have written it already.
        const row = await tx.selectFrom('messages').select(['locked_until', 'updated_at']).where('id', '=', message.id).executeTakeFirst();
        return row?.locked_until === 0 && row.updated_at === outcome.updated_at;
      }),
    );
  }

  /**
   * Logs a transient failure (the server down, TLS or AUTH refused, throttling) at warn, each
   * distinct one at most once a minute: an operator must see why messages stay queued (a wrong
   * password would otherwise be retried for a day in silence), and an outage must not flood
   * the log with one line per message and try.
   */
  private warnRetrying(message: MessageTable, error: TransientSendError): void {
    // A server's reply may name the recipient (450 <wanjiru@example.com>: greylisted): the log
    // gets no address, and one line stands for every recipient the same failure hits.
    const text = error.message.replace(/[^\s<>"]+@[^\s<>"]+/g, '<address>').replace(/\+?[0-9]{8,15}/g, '<number>');
    const key = `${message.type} ${text}`;
    if (!this.warned.due(key)) return;
    this.log.warn({ type: message.type, messageId: message.id, error: text }, 'message not sent, will retry');
  }

  /**
   * Extends the lease of every message that has been on the wire for a third of a lease or
   * more, each only if this process still holds it. Without this, a send slower than the
   * lease (a mail server taking 30 s to answer) would be claimed and sent again by a worker.
   * A send still open after MAX_SEND_MS is not renewed: its lease runs out and it is retried.
   */
  private renewLeases(): Promise<void> {
    if (this.renewing) return this.renewal;
    const now = this.now();
    const held = [...this.sending]
      .filter(([message, since]) => message.locked_until - now <= (this.leaseMs * 2) / 3 && now - since < MAX_SEND_MS)
      .map(([message]) => ({ message, from: message.locked_until }));
    if (held.length === 0) return this.renewal;
    const until = now + this.leaseMs;
    this.renewing = true;
    const renewal = this.store
      // The unit may run twice (a neighbour in its batch failed): it only reads `from`, and its
      // outcome is applied to the messages once it has committed.
      .write(async (tx) => {
        const renewed = new Set<MessageTable>();
        for (const { message, from } of held) {
          const result = await tx
            .updateTable('messages')
            .set({ locked_until: until })
            .where('id', '=', message.id)
            .where('locked_until', '=', from)
            .executeTakeFirst();
          if (Number(result.numUpdatedRows) === 1) renewed.add(message);
        }
        return renewed;
      })
      .then((renewed) => {
        for (const { message } of held) {
          if (renewed.has(message)) message.locked_until = until;
          else this.log.warn({ messageId: message.id }, 'lost the lease of a message being sent');
        }
      })
      .catch((err: unknown) => this.log.error({ err }, 'message leases not renewed'))
      .finally(() => {
        this.renewing = false;
      });
    this.renewal = renewal;
    return renewal;
  }

  private transmit(message: MessageTable): Promise<SendResult> {
    // Not sent once it is no longer worth sending: the transport does not wait past the window.
    const notAfter = message.created_at + this.retryWindowMs(message.purpose);
    if (message.type === 'email') {
      const transport = this.transports.email;
      if (!transport) return Promise.resolve({ status: 'delivered', providerId: null });
      return transport.send({
        id: message.id,
        to: message.email ?? '',
        subject: message.subject ?? '',
        contentType: message.content_type === 'html' ? 'html' : 'text',
        content: this.textOf(message),
        createdAt: message.created_at,
        urgent: message.merchant_id === null,
        first: holdsCode(message.purpose),
        notAfter,
      });
    }
    const transport = this.transports.sms;
    if (!transport) return Promise.resolve({ status: 'delivered', providerId: null });
    return transport.send({
      id: message.id,
      countryCode: message.phone_country_code ?? '',
      number: message.phone_number ?? '',
      content: this.textOf(message),
      urgent: message.merchant_id === null,
      first: holdsCode(message.purpose),
      notAfter,
      throttledBefore: message.last_error?.includes('ESME_RTHROTTLED') === true,
    });
  }

  /** The text to hand to the transport; a login code that does not open is never sent. */
  private textOf(message: MessageTable): string {
    try {
      return readText(this.box, message);
    } catch {
      throw new PermanentSendError(
        'the stored login code does not open: it was sealed under another LIPA_MASTER_KEY',
        'Not sent: the code was sealed under another master key; ask for a new one.',
      );
    }
  }

  /**
   * Once a real transport has taken a login code, it need not stay in the database, even
   * sealed: the stored text keeps its shape with the digits hidden. (The embedded outbox
   * keeps it sealed: there the outbox is the recipient's inbox.)
   */
  private redactedAfterSend(message: MessageTable, status: MessageStatus): string {
    if (!holdsCode(message.purpose) || (status !== 'sent' && status !== 'delivered')) return message.content;
    try {
      return hideCodes(readText(this.box, message));
    } catch {
      return message.content; // sealed under another key: it stays sealed
    }
  }

  /** Applies kept receipts whose submission is now on record (Receipts.matchKept); nothing without SMPP. */
  matchEarlyReceipts(): Promise<number> {
    return this.transports.sms === null ? Promise.resolve(0) : this.receipts.matchKept();
  }

  /**
   * Stops: the transports finish the sends on the wire and refuse those still waiting for a
   * place, which stay queued (for the next start, or another instance) rather than going out
   * for minutes after a SIGTERM; every attempt's outcome is recorded before this resolves.
   */
  async close(): Promise<void> {
    this.recorder.stop();
    const transportsClosed = Promise.allSettled([this.transports.email?.close(), this.transports.sms?.close()]);
    await Promise.allSettled([...this.running]);
    for (const closed of await transportsClosed) {
      if (closed.status === 'rejected') this.log.error({ err: closed.reason }, 'a message transport did not close cleanly');
    }
    // Receipts that came while the transports drained are recorded before the store closes.
    await this.receipts.settled();
    // Renewed until here: a slow send on the wire keeps its lease while it finishes.
    if (this.renewTimer) clearInterval(this.renewTimer);
  }
}
