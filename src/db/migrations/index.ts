import type { Migration } from 'kysely';
import * as m001 from './001_foundation.js';
import * as m002 from './002_payments.js';
import * as m003 from './003_messaging.js';
import * as m004 from './004_partial_message_indexes.js';
import * as m005 from './005_message_failure_reason.js';
import * as m006 from './006_early_receipts.js';
import * as m007 from './007_ledger_append_only.js';
import * as m008 from './008_own_messages_due.js';
import * as m009 from './009_scale_indexes.js';
import * as m010 from './010_login_codes_due.js';
import * as m011 from './011_merchant_suspension.js';
import * as m012 from './012_refunds_and_statements.js';

/** Every migration, in order. Names never change once released. */
export const migrations: Record<string, Migration> = {
  '001_foundation': m001,
  '002_payments': m002,
  '003_messaging': m003,
  '004_partial_message_indexes': m004,
  '005_message_failure_reason': m005,
  '006_early_receipts': m006,
  '007_ledger_append_only': m007,
  '008_own_messages_due': m008,
  '009_scale_indexes': m009,
  '010_login_codes_due': m010,
  '011_merchant_suspension': m011,
  '012_refunds_and_statements': m012,
};
