import type { Generated } from 'kysely';

/**
 * The database as Kysely sees it. Times are epoch milliseconds, money is integer minor
 * units (cents), booleans are 0/1: the same on SQLite and PostgreSQL.
 */
export interface Database {
  merchants: MerchantTable;
  payers: PayerTable;
  categories: CategoryTable;
  otp_challenges: OtpChallengeTable;
  sessions: SessionTable;
  auth_throttle: AuthThrottleTable;
  api_keys: ApiKeyTable;
  messaging_keys: MessagingKeyTable;
  points_of_sale: PointOfSaleTable;
  ledger_accounts: LedgerAccountTable;
  ledger_transactions: LedgerTransactionTable;
  ledger_postings: LedgerPostingTable;
  ledger_entries: LedgerEntryTable;
  refunds: RefundTable;
  settlements: SettlementTable;
  messages: MessageTable;
  early_receipts: EarlyReceiptTable;
  payments: PaymentTable;
  nonces: NonceTable;
  callback_events: CallbackEventTable;
  callback_deliveries: CallbackDeliveryTable;
  callback_attempts: CallbackAttemptTable;
}

export interface MerchantTable {
  id: string;
  login: string;
  name: string;
  password_hash: string;
  created_at: number;
  /** When the operator suspended it (merchants/suspension.ts); null while it may work. */
  suspended_at: number | null;
}

export interface PayerTable {
  id: string;
  phone: string;
  name: string;
  pin_hash: string;
  created_at: number;
  pin_failures: Generated<number>;
  pin_locked_until: Generated<number>;
}

export interface CategoryTable {
  id: string;
  name: string;
  mcc: string;
}

export type SubjectType = 'merchant' | 'payer';
/** Which listener a session was opened on: mock sessions are refused by the main listener. */
export type Audience = 'main' | 'mock';

export interface OtpChallengeTable {
  id: string;
  login: string;
  subject_type: SubjectType;
  subject_id: string;
  otp_hash: string;
  attempts: number;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
}

export interface SessionTable {
  id: string;
  token_hash: string;
  subject_type: SubjectType;
  subject_id: string;
  audience: Audience;
  created_at: number;
  expires_at: number;
}

export interface AuthThrottleTable {
  key: string;
  window_start: number;
  count: number;
}

export interface ApiKeyTable {
  id: string;
  merchant_id: string;
  name: string | null;
  secret_enc: string;
  created_at: number;
  revoked_at: number | null;
}

export interface MessagingKeyTable {
  id: string;
  merchant_id: string;
  name: string | null;
  key_hash: string;
  key_prefix: string;
  created_at: number;
  revoked_at: number | null;
}

export interface PointOfSaleTable {
  id: string;
  merchant_id: string;
  terminal_id: string;
  category_id: string;
  pos_company_name: string;
  description: string;
  website: string;
  result_url: string;
  server_url: string;
  trust_all_certificates: number;
  created_at: number;
}

/** `clearing`: the operator's settlement clearing account, where settled money leaves for the banks. */
export type LedgerAccountKind = 'cash_in' | 'wallet' | 'merchant' | 'clearing';

export interface LedgerAccountTable {
  id: string;
  kind: LedgerAccountKind;
  owner_id: string;
  currency: string;
  /** Kept in the same transaction as the postings; checkLedger() proves they agree. */
  balance: number;
  /** The seq of the account's last statement entry (ledger_entries). */
  entries: Generated<number>;
  /** The time of that entry: the next is never dated before it. */
  last_entry_at: Generated<number>;
  created_at: number;
}

export interface LedgerTransactionTable {
  id: string;
  kind: string;
  reference: string | null;
  created_at: number;
}

export interface LedgerPostingTable {
  id: string;
  transaction_id: string;
  account_id: string;
  amount: number;
  created_at: number;
}

/**
 * One line of an account's statement: a posting to a wallet, merchant or clearing account, numbered
 * per account in the order the balance moved (migration 012), with the balance it left.
 */
export interface LedgerEntryTable {
  account_id: string;
  seq: number;
  transaction_id: string;
  /** The ledger transaction's kind: payment, refund, deposit… */
  kind: string;
  /** Minor units, signed: + money in, − money out. */
  amount: number;
  balance_after: number;
  /** The payment's or refund's identifier (the payer's id for a deposit). */
  reference: string | null;
  /** The payment's orderId, for a payment or a refund of one. */
  order_id: string | null;
  created_at: number;
}

export type RefundStatus = 'succeeded';

export interface RefundTable {
  id: string;
  merchant_id: string;
  payment_id: string;
  /** The signing key that asked for it; null when the merchant asked from the dashboard. */
  api_key_id: string | null;
  refund_reference: string;
  amount: number;
  currency: string;
  reason: string | null;
  status: RefundStatus;
  /** SHA-256 of the normalised request: the same refundReference with the same body is the same refund. */
  fingerprint: string;
  created_at: number;
}

/** A payment of a merchant's balance to its bank, made by the operator (CONTRACT §13). */
export interface SettlementTable {
  id: string;
  merchant_id: string;
  amount: number;
  currency: string;
  /** The operator's reference (the bank transfer's); unique per merchant. */
  reference: string;
  created_at: number;
}

export type MessageType = 'email' | 'sms';
export type MessageStatus = 'queued' | 'sent' | 'delivered' | 'failed';

export interface MessageTable {
  id: string;
  /** null for the service's own messages (OTPs, payment prompts). */
  merchant_id: string | null;
  purpose: string;
  type: MessageType;
  email: string | null;
  subject: string | null;
  content_type: string | null;
  phone_country_code: string | null;
  phone_number: string | null;
  content: string;
  status: MessageStatus;
  created_at: number;
  updated_at: number;
  /** The messaging key that sent it (API messages). */
  messaging_key_id: string | null;
  /** The next hop's id (SMTP Message-ID, SMPP message_id), to match delivery receipts. */
  provider_id: string | null;
  /** SMS segments (GSM-7 / UCS-2). */
  segments: number | null;
  attempts: number;
  next_attempt_at: number;
  locked_until: number;
  /** For operators: the transport's whole error, hosts included. */
  last_error: string | null;
  /** For the sender (the lookup's `error`): why a failed message failed, naming no host. */
  failure_reason: string | null;
}

/** A delivery receipt that came before the record of its submission (migration 006). */
export interface EarlyReceiptTable {
  provider_id: string;
  delivered: number;
  detail: string;
  received_at: number;
}

export type PaymentStatus = 'pending' | 'no_user' | 'paid' | 'declined' | 'expired';
export type DeclineReason = 'declined_by_payer' | 'insufficient_funds' | 'cancelled_by_merchant';

export interface PaymentTable {
  id: string;
  merchant_id: string;
  pos_id: string;
  terminal_id: string;
  /** The signing key that created the payment; its callbacks are signed with it. */
  api_key_id: string;
  order_id: string;
  amount: number;
  currency: string;
  merchant_stika: string | null;
  description: string | null;
  payer_phone: string;
  payer_id: string | null;
  callback_url: string;
  success_redirect_url: string | null;
  /** SHA-256 of the normalised create request: same body again is the same payment. */
  fingerprint: string;
  status: PaymentStatus;
  reason: DeclineReason | null;
  /** Minor units refunded so far (CONTRACT §11); a refund leaves the status paid. */
  refunded_amount: number;
  created_at: number;
  updated_at: number;
  expires_at: number;
}

export interface NonceTable {
  key_id: string;
  nonce: string;
  expires_at: number;
}

export interface CallbackEventTable {
  id: string;
  payment_id: string;
  merchant_id: string;
  api_key_id: string;
  pos_id: string;
  /** The exact JSON body sent on every attempt. */
  payload: string;
  created_at: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface CallbackDeliveryTable {
  id: string;
  event_id: string;
  url: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number;
  /** A worker's lease: another worker skips the row until then (crash-safe). */
  locked_until: number;
  last_error: string | null;
  /** A redelivery was asked for while an attempt was on the wire. */
  redeliver_requested: Generated<number>;
  created_at: number;
  updated_at: number;
}

export interface CallbackAttemptTable {
  id: string;
  delivery_id: string;
  attempted_at: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}
