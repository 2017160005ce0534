/**
 * Prometheus counters of what this process has done since it started: each instance counts
 * its own, and Prometheus sums instances and reads restarts as counter resets. Counted once
 * the change has committed (see onCommit), so that a rolled-back change is never counted.
 *
 * Counting beats counting rows: a `count(*)` over every payment ever made blocks SQLite's
 * event loop for seconds once the table holds millions (2.5 s for 2 million payments and
 * 3 million messages on the development machine).
 */

import { onCommit, type Tx } from '../db/database.js';
import type { MessageStatus, PaymentStatus } from '../db/schema.js';

const COUNTERS = {
  lipa_payment_status_changes_total:
    'Payments moved to a status by this instance since it started (paid, declined, expired, or pending when the payer registers).',
  lipa_message_status_changes_total: 'Messages moved to sent, delivered or failed by this instance since it started, by type.',
} as const;

type CounterName = keyof typeof COUNTERS;

/** Values by counter, then by label set (already escaped for the text format). */
const values = new Map((Object.keys(COUNTERS) as CounterName[]).map((name) => [name, new Map<string, number>()]));

function increment(name: CounterName, labels: string): void {
  const series = values.get(name);
  series?.set(labels, (series.get(labels) ?? 0) + 1);
}

/** Counts a payment's move to `status` once the unit running on `tx` commits. */
export function countPaymentStatus(tx: Tx, status: PaymentStatus): void {
  onCommit(tx, () => increment('lipa_payment_status_changes_total', `status="${status}"`));
}

/** Counts a message's move to sent, delivered or failed once the unit running on `tx` commits. */
export function countMessageStatus(tx: Tx, type: 'email' | 'sms', status: MessageStatus): void {
  onCommit(tx, () => increment('lipa_message_status_changes_total', `type="${type}",status="${status}"`));
}

/** The counters in the Prometheus text format, one line each (HELP and TYPE included). */
export function counterLines(): string[] {
  const lines: string[] = [];
  for (const name of Object.keys(COUNTERS) as CounterName[]) {
    lines.push(`# HELP ${name} ${COUNTERS[name]}`, `# TYPE ${name} counter`);
    for (const [labels, count] of values.get(name) ?? []) lines.push(`${name}{${labels}} ${count}`);
  }
  return lines;
}
