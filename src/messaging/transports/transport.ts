/**
 * How a stored message leaves the service. The messaging worker hands each queued message
 * to the transport of its type and records the outcome; transports know nothing of the
 * database.
 */
export interface OutboundEmail {
  /** Lipa's message id (unguessable); use it as a correlation header where possible. */
  id: string;
  to: string;
  subject: string;
  /** `html` sends text/html; `text` sends text/plain (also for HTML-looking content). */
  contentType: 'text' | 'html';
  content: string;
  /** When the message was accepted (ms): its Date header, the same on every try. */
  createdAt: number;
  /** The service's own message: it goes first (see OutboundSms.urgent). */
  urgent?: boolean;
  /** A login code: before the service's other messages too (see OutboundSms.first). */
  first?: boolean;
  /** Epoch ms after which it is no longer worth sending: the transport waits for a place no longer. */
  notAfter?: number;
}

export interface OutboundSms {
  id: string;
  /** Country calling code digits, e.g. "254". */
  countryCode: string;
  /** National number digits, e.g. "708000001". */
  number: string;
  content: string;
  /**
   * The service's own message (a login code, a payment prompt): when the transport has more
   * sends than it can have under way, it goes before merchants' messages, so that a merchant's
   * backlog to a slow server cannot keep anybody from logging in or paying.
   */
  urgent?: boolean;
  /**
   * A login code (urgent too): it waits in front of the service's other messages, so that a
   * flood of payment prompts (a merchant can cause one) cannot keep anybody from signing in.
   */
  first?: boolean;
  /** Epoch ms after which it is no longer worth sending: the transport waits for a place or its turn no longer. */
  notAfter?: number;
  /**
   * Its previous try was throttled (ESME_RTHROTTLED): throttled again, it goes back to the
   * worker at once rather than pause the bind, so that one number the SMSC keeps refusing
   * cannot hold everyone up.
   */
  throttledBefore?: boolean;
}

export interface SendResult {
  /**
   * `delivered`: the transport knows it arrived (the embedded outbox);
   * `sent`: accepted by the next hop (SMTP server, SMSC); a receipt may follow.
   */
  status: 'sent' | 'delivered';
  /** The next hop's id for the message (SMTP Message-ID, SMPP message_id), for receipts. */
  providerId: string | null;
  /** When the next hop was handed it (epoch ms; the last submit_sm of an SMS throttled first). */
  submittedAt?: number;
}

/**
 * A failed send. `message` is for operators and may name hosts and relays; `reason`, when
 * the transport knows one, says what was wrong in words the message's sender may read (the
 * SMSC's refusal status, the mail server's reply code), and never names a host.
 */
abstract class SendError extends Error {
  constructor(
    message: string,
    readonly reason: string | null = null,
  ) {
    super(message);
  }
}
/** Never worth retrying: the recipient or content was refused for good (5xx SMTP, SMPP rejections). */
export class PermanentSendError extends SendError {
  constructor(
    message: string,
    reason: string | null = null,
    /** The server said the recipient's mailbox does not exist (SMTP 5.1.1-5.1.6 or 5.1.10 at RCPT TO; see refusesAddress). */
    readonly invalidRecipient = false,
  ) {
    super(message, reason);
  }
}
/** Worth retrying later: connection refused or dropped, timeouts, 4xx SMTP, throttling. */
export class TransientSendError extends SendError {}
/** Not tried at all: the transport is stopping. The message stays queued as it was, for the next start or another instance. */
export class TransportClosedError extends TransientSendError {
  constructor(what: string) {
    super(`${what} is closed`);
  }
}

export interface EmailTransport {
  readonly name: string;
  send(message: OutboundEmail): Promise<SendResult>;
  close(): Promise<void>;
}

/** A delivery receipt from the SMSC (SMPP deliver_sm with esm_class receipt). */
export interface DeliveryReceipt {
  providerId: string;
  delivered: boolean;
  /** The receipt's stat (DELIVRD, UNDELIV, EXPIRED, REJECTD, …) and err fields. */
  detail: string;
}

export interface SmsTransport {
  readonly name: string;
  send(message: OutboundSms): Promise<SendResult>;
  /** Called for every delivery receipt received (SMPP); never for the embedded outbox. */
  onReceipt(listener: (receipt: DeliveryReceipt) => void): void;
  /** Connects in the background (SMPP: binds), so that receipts come and /metrics is true before the first send. */
  start?(): void;
  /** Each bind to the SMSC and whether it is up right now (SMPP), for /metrics. */
  binds?(): Record<string, boolean>;
  close(): Promise<void>;
}

/** A send in line: its place (lower goes first) and how it is woken. */
interface InLine {
  place: number;
  wake: (how: 'handed' | 'look') => void;
}

/** How far in front the first places are: more than any process hands out. */
const FIRST_PLACES = 2 ** 52;

/**
 * Sends waiting for a free slot of a transport (an SMTP connection, an SMPP window place),
 * the service's own messages first (OutboundSms.urgent), each lane in order of arrival: a
 * send that waits again (woken, it found no room after all; or it was throttled) keeps its
 * place when it passes the same `place` (from place()) each time.
 */
export class SlotQueue {
  readonly #urgent: InLine[] = [];
  readonly #other: InLine[] = [];
  #places = 0;
  #firstPlaces = 0;

  /** How many wait. */
  get size(): number {
    return this.#urgent.length + this.#other.length;
  }

  /** Whether someone waiting goes before a send of this lane and place (the service's own go first). */
  ahead(urgent: boolean | undefined, place: number): boolean {
    const firstUrgent = this.#urgent[0];
    if (firstUrgent !== undefined && (!urgent || firstUrgent.place < place)) return true;
    const firstOther = this.#other[0];
    return !urgent && firstOther !== undefined && firstOther.place < place;
  }

  /**
   * A place in line, after every place handed out so far; a `first` one (a login code) after
   * every first place so far but before every other (its lane is still its own).
   */
  place(first = false): number {
    return first ? ++this.#firstPlaces - FIRST_PLACES : ++this.#places;
  }

  /**
   * Resolves `handed` when wake() hands this waiter a slot, `look` when wakeAll() asks every
   * waiter to look again (holding no slot), `timeout` after `timeoutMs`: a send that waits
   * too long gives up before it starts, so that it is tried again later instead of going out
   * long after its lease was lost to another try.
   */
  wait(urgent: boolean | undefined, timeoutMs: number, place = this.place()): Promise<'handed' | 'look' | 'timeout'> {
    const lane = urgent ? this.#urgent : this.#other;
    return new Promise((resolve) => {
      const entry: InLine = {
        place,
        wake: (how) => {
          clearTimeout(timer);
          resolve(how);
        },
      };
      const timer = setTimeout(
        () => {
          const at = lane.indexOf(entry);
          if (at >= 0) lane.splice(at, 1);
          resolve('timeout');
        },
        Math.max(0, timeoutMs),
      );
      // Usually the last place; one that waits again goes back where it was.
      let at = lane.length;
      while (at > 0 && (lane[at - 1] as InLine).place > place) at--;
      lane.splice(at, 0, entry);
    });
  }

  /**
   * Hands a free slot to the first in line, or only to one of the service's own messages when
   * `urgentOnly`: which lane it went to, or null when nobody (eligible) waits.
   */
  wake(urgentOnly = false): 'urgent' | 'other' | null {
    const urgent = this.#urgent.shift();
    if (urgent) {
      urgent.wake('handed');
      return 'urgent';
    }
    const other = urgentOnly ? undefined : this.#other.shift();
    other?.wake('handed');
    return other ? 'other' : null;
  }

  /** Wakes every waiter to look again (the link is back, or the transport closes). */
  wakeAll(): void {
    for (const entry of this.#urgent.splice(0)) entry.wake('look');
    for (const entry of this.#other.splice(0)) entry.wake('look');
  }
}

/** The longest a send waits for a free slot of its transport before it gives up, unsent, to be tried again. */
export const SLOT_WAIT_MS = 5 * 60_000;

/**
 * How long a send may wait for its place: `limitMs`, or less when its message stops being
 * worth sending first (`notAfter`, epoch ms); and the words for a wait that ran out.
 */
export function waitBudget(notAfter: number | undefined, limitMs: number): { ms: number; ranOut: string } {
  const worthMs = notAfter === undefined ? limitMs : notAfter - Date.now();
  return worthMs < limitMs
    ? { ms: worthMs, ranOut: 'while the message was worth sending' }
    : { ms: limitMs, ranOut: `within ${limitMs / 1000} s` };
}
