import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against no fixed schema
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('payments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('merchant_id', 'text', (c) => c.notNull().references('merchants.id'))
    .addColumn('pos_id', 'text', (c) => c.notNull().references('points_of_sale.id'))
    .addColumn('terminal_id', 'text', (c) => c.notNull())
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('order_id', 'text', (c) => c.notNull())
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('merchant_stika', 'text')
    .addColumn('description', 'text')
    .addColumn('payer_phone', 'text', (c) => c.notNull())
    .addColumn('payer_id', 'text')
    .addColumn('callback_url', 'text', (c) => c.notNull())
    .addColumn('success_redirect_url', 'text')
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('payments_terminal_order', ['terminal_id', 'order_id'])
    .execute();
  await db.schema.createIndex('payments_status_expiry').on('payments').columns(['status', 'expires_at']).execute();
  await db.schema.createIndex('payments_payer').on('payments').columns(['payer_phone', 'status']).execute();
  await db.schema.createIndex('payments_merchant').on('payments').columns(['merchant_id', 'created_at']).execute();

  await db.schema
    .createTable('nonces')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('nonces_pk', ['key_id', 'nonce'])
    .execute();
  await db.schema.createIndex('nonces_expiry').on('nonces').column('expires_at').execute();

  await db.schema
    .createTable('callback_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('payment_id', 'text', (c) => c.notNull().references('payments.id'))
    .addColumn('merchant_id', 'text', (c) => c.notNull())
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('pos_id', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('callback_events_payment').on('callback_events').columns(['payment_id', 'created_at']).execute();

  await db.schema
    .createTable('callback_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('event_id', 'text', (c) => c.notNull().references('callback_events.id'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_until', 'bigint', (c) => c.notNull())
    .addColumn('last_error', 'text')
    .addColumn('redeliver_requested', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('callback_deliveries_event_url', ['event_id', 'url'])
    .execute();
  await db.schema.createIndex('callback_deliveries_due').on('callback_deliveries').columns(['status', 'next_attempt_at']).execute();

  await db.schema
    .createTable('callback_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull().references('callback_deliveries.id'))
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('callback_attempts_delivery').on('callback_attempts').columns(['delivery_id', 'attempted_at']).execute();

  // Wrong-PIN lockout of a wallet's payment approvals.
  await db.schema
    .alterTable('payers')
    .addColumn('pin_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('payers')
    .addColumn('pin_locked_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}
