import { sql } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { MessageStatus } from '../db/schema.js';
import { countMessageStatus } from '../ops/counters.js';
import type { DeliveryReceipt } from './transports/transport.js';

/** Receipts that overtake the record of their submission wait this long for it in memory (this process's own sends). */
const EARLY_RECEIPT_MS = 60_000;
/** How far apart the clocks of two instances may be when a receipt's arrival is compared with another's submit. */
const CLOCK_SKEW_MS = 10_000;

/**
 * The message last given the SMSC id in the column `providerIdRef` of the outer query: the
 * one a receipt for that id is for. An SMSC's ids repeat (many count from 1 again after a
 * restart); an older message with the id, whose own receipt never came, is not settled by a
 * newer message's receipt, nor by a duplicate of it.
 */
function lastGiven(db: Tx, providerIdRef: string) {
  return db
    .selectFrom('messages as n')
    .select('n.id')
    .where('n.provider_id', '=', sql.ref<string>(providerIdRef))
    .orderBy('n.updated_at', 'desc')
    .orderBy('n.id', 'desc')
    .limit(1);
}

/**
 * Kept receipts whose message is now on record (exported for the test of its plan). A CROSS
 * JOIN, which SQLite never reorders: it walks the kept receipts (a handful) and finds each
 * one's message by its SMSC id. Joined the other way it walked every message still `sent`,
 * and an email stays `sent` for good (SMTP has no receipts): 2.5 s a second with 1.5 million.
 */
export function keptReceiptsMatched(db: Tx) {
  return (
    db
      .selectFrom('early_receipts as e')
      .crossJoin('messages as m')
      .whereRef('m.provider_id', '=', 'e.provider_id')
      .select(['m.id', 'e.provider_id', 'e.delivered', 'e.detail', 'e.received_at'])
      .where('m.status', 'in', ['sent', 'queued'])
      // Never a receipt from before the message was even accepted (see overtaken).
      .whereRef('e.received_at', '>=', 'm.created_at')
      .where('m.id', '=', lastGiven(db, 'm.provider_id'))
      .limit(200)
  );
}

/**
 * Delivery receipts (SMPP deliver_sm) move a sent SMS to delivered or failed. One that
 * overtook the record of its submission (it came before the submit_sm_resp, or over another
 * instance's bind) is kept in early_receipts, durably, before the SMSC is told it arrived,
 * and applied once that record is there: at once by the Messenger when this process sent it
 * (overtaken, applyKept), else by matchKept() within a second.
 */
export class Receipts {
  /** Receipts this process kept for its own sends still being recorded, by provider id. */
  private readonly kept = new Map<string, { receipt: DeliveryReceipt; at: number }>();
  private readonly applying = new Set<Promise<void>>();

  constructor(
    private readonly store: Db,
    private readonly now: () => number,
  ) {}

  /** Records a receipt, or keeps it until its submission is on record. */
  apply(receipt: DeliveryReceipt): Promise<void> {
    const applying = this.recordOrKeep(receipt);
    this.applying.add(applying);
    void applying.finally(() => this.applying.delete(applying)).catch(() => undefined);
    return applying;
  }

  /** Resolves once every receipt being applied is (stopping waits for them). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.applying]);
  }

  private async recordOrKeep(receipt: DeliveryReceipt): Promise<void> {
    const now = this.now();
    const matched = await this.store.write(async (tx) => {
      if (await this.record(tx, receipt, now)) return true;
      await tx
        .insertInto('early_receipts')
        .values({ provider_id: receipt.providerId, delivered: receipt.delivered ? 1 : 0, detail: receipt.detail, received_at: now })
        // A newer receipt for the id replaces one kept before: that one was for an earlier
        // message with the same id (an SMSC that reuses ids) or a duplicate, never this one's.
        .onConflict((oc) =>
          oc.column('provider_id').doUpdateSet({
            delivered: receipt.delivered ? 1 : 0,
            detail: receipt.detail,
            received_at: now,
          }),
        )
        .execute();
      return false;
    });
    if (!matched) {
      for (const [id, early] of this.kept) if (now - early.at > EARLY_RECEIPT_MS) this.kept.delete(id);
      this.kept.set(receipt.providerId, { receipt, at: now });
    }
  }

  /**
   * The receipt that overtook the record of this submission, sent at `sentAt`, if this process
   * kept one. A receipt kept from before the send was for another message (a duplicate, or one
   * for an earlier message the SMSC gave the same id): it is forgotten, so that matchKept does
   * not apply it either.
   */
  async overtaken(providerId: string, sentAt: number): Promise<{ receipt: DeliveryReceipt; at: number } | undefined> {
    const early = this.kept.get(providerId);
    if (early === undefined || early.at >= sentAt) return early;
    this.kept.delete(providerId);
    await this.store.write((tx) =>
      tx.deleteFrom('early_receipts').where('provider_id', '=', providerId).where('received_at', '=', early.at).execute(),
    );
    return undefined;
  }

  /**
   * In the unit that records a submission (SMSC id `providerId`, submitted at `submittedAt`):
   * receipts kept for that id from before the submit_sm (any instance's) were another
   * message's, so they are forgotten before the record lets matchKept pair them with this one.
   */
  async forgetBefore(tx: Tx, providerId: string, submittedAt: number): Promise<void> {
    const early = this.kept.get(providerId);
    if (early !== undefined && early.at < submittedAt) {
      // This process's own clock: exact.
      this.kept.delete(providerId);
      await tx.deleteFrom('early_receipts').where('provider_id', '=', providerId).where('received_at', '=', early.at).execute();
    }
    // Another instance's clock may be a little behind this one's: only those clearly older.
    const before = submittedAt - CLOCK_SKEW_MS;
    await hotQuery(tx, 'early_receipts.forget-before', [providerId, before], () =>
      tx.deleteFrom('early_receipts').where('provider_id', '=', providerId).where('received_at', '<', before),
    );
  }

  /** Applies kept receipts whose submission is now on record (any instance's); housekeeping forgets those kept an hour. */
  async matchKept(): Promise<number> {
    const due = await keptReceiptsMatched(this.store.db).execute();
    for (const row of due) {
      await this.applyKept({ providerId: row.provider_id, delivered: row.delivered === 1, detail: row.detail }, row.id, row.received_at);
    }
    return due.length;
  }

  /**
   * A kept receipt (received at `receivedAt`), now that its submission is on record: applied
   * to that one message (another with the same SMSC id is not its) and forgotten in one unit,
   * unless a newer receipt for the id has replaced it meanwhile.
   */
  async applyKept(receipt: DeliveryReceipt, messageId: string, receivedAt: number): Promise<void> {
    const now = this.now();
    if (this.kept.get(receipt.providerId)?.at === receivedAt) this.kept.delete(receipt.providerId);
    await this.store.write(async (tx) => {
      await this.record(tx, receipt, now, messageId);
      await tx.deleteFrom('early_receipts').where('provider_id', '=', receipt.providerId).where('received_at', '=', receivedAt).execute();
    });
  }

  /** The receipt's update of its message (of that one, when `messageId` is given); whether there was one to update. */
  private async record(tx: Tx, receipt: DeliveryReceipt, now: number, messageId?: string): Promise<boolean> {
    const status: MessageStatus = receipt.delivered ? 'delivered' : 'failed';
    const detail = receipt.delivered ? null : receipt.detail;
    // The receipt's words are the SMSC's: passed on only in their standard shape (stat, err code).
    const reason =
      detail === null
        ? null
        : /^[A-Z]{5,8}( err:[0-9A-Za-z]{1,8})?$/.test(detail)
          ? `The SMS centre reported it not delivered: ${detail}.`
          : 'The SMS centre reported it not delivered.';
    const set = { status, last_error: detail, failure_reason: reason, updated_at: now };
    const updated =
      messageId === undefined
        ? await hotQuery(tx, 'messages.receipt', [status, detail, reason, now, receipt.providerId, 1, 'sent', 'queued'], () =>
            tx
              .updateTable('messages')
              .set(set)
              .where('provider_id', '=', receipt.providerId)
              .where('id', '=', lastGiven(tx, 'messages.provider_id'))
              .where('status', 'in', ['sent', 'queued']),
          )
        : await tx
            .updateTable('messages')
            .set(set)
            .where('id', '=', messageId)
            .where('provider_id', '=', receipt.providerId)
            .where('status', 'in', ['sent', 'queued'])
            .executeTakeFirst();
    const applied = Number(('numUpdatedRows' in updated ? updated.numUpdatedRows : updated.numAffectedRows) ?? 0n) > 0;
    if (applied) countMessageStatus(tx, 'sms', status);
    return applied;
  }
}
