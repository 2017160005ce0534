import { Type } from 'typebox';
import { CursorParam, LimitParam } from '../http/pagination.js';
import { patternString } from '../http/schemas.js';
import { MAX_DEPOSIT } from '../ledger/money.js';

export const Phone = patternString('^[0-9]{8,15}$', 'must be 8 to 15 digits with the country code, no plus sign', {
  description: 'Digits with country code, no plus sign',
});
export const Amount = Type.Number({
  minimum: 0.01,
  maximum: MAX_DEPOSIT,
  description: 'Major units (KES), more than 0, at most 10,000,000, at most 2 decimals',
});

export const CreateMerchantBody = Type.Object({
  // Checked in code by the messaging API's own rule (isSendableAddress), which takes IDN domains.
  login: Type.String({
    maxLength: 254,
    description: 'An email address a login code can be sent to (the rules of a message email address); trimmed and lower-cased',
  }),
  password: Type.String({ minLength: 8, maxLength: 256 }),
  name: Type.String({ minLength: 1, maxLength: 200 }),
});
export const MerchantResponse = Type.Object({ merchantId: Type.String(), login: Type.String(), name: Type.String() });
export const MerchantListed = Type.Object({
  merchantId: Type.String(),
  login: Type.String(),
  name: Type.String(),
  createdAt: Type.String(),
  suspendedAt: Type.Union([Type.String(), Type.Null()], { description: 'When the operator suspended it; null while it may work' }),
});

/** The query of each of the operator's lists: a page. */
export const ListQuery = Type.Object({ limit: LimitParam, cursor: CursorParam });

export const MerchantParams = Type.Object({ merchantId: Type.String() });
export const MerchantStanding = Type.Object({
  merchantId: Type.String(),
  login: Type.String(),
  name: Type.String(),
  suspendedAt: Type.Union([Type.String(), Type.Null()]),
});

export const CreatePayerBody = Type.Object({
  phone: { ...Phone, description: 'The international number as digits, no plus sign, no trunk 0: 254712345678' },
  name: Type.String({ minLength: 1, maxLength: 200 }),
  pin: patternString('^[0-9]{4,6}$', 'must be 4 to 6 digits', { description: 'Wallet PIN, 4 to 6 digits' }),
  balance: Type.Optional(
    Type.Number({ minimum: 0, maximum: MAX_DEPOSIT, description: 'Starting balance in major units: 0 to 10,000,000, at most 2 decimals' }),
  ),
});
export const PayerResponse = Type.Object({ payerId: Type.String(), phone: Type.String(), balance: Type.Number() });
export const PayerListed = Type.Object({
  payerId: Type.String(),
  phone: Type.String(),
  name: Type.String(),
  balance: Type.Number({ description: 'Wallet balance, major units' }),
  currency: Type.String(),
  createdAt: Type.String(),
});

export const DepositBody = Type.Object({ amount: Amount });
export const DepositParams = Type.Object({ phone: Phone });
export const DepositResponse = Type.Object({ phone: Type.String(), balance: Type.Number() });

export const OutboxMessage = Type.Object({
  id: Type.String(),
  type: Type.String(),
  purpose: Type.String(),
  to: Type.String(),
  subject: Type.Union([Type.String(), Type.Null()]),
  contentType: Type.Union([Type.String(), Type.Null()], { description: 'Email only: text or html, as it went out' }),
  content: Type.String(),
  status: Type.String(),
  createdAt: Type.String(),
});

export const SettlementBody = Type.Object({
  amount: Type.Number({ description: 'Major units, > 0, at most 2 decimals' }),
  reference: Type.String({ minLength: 1, maxLength: 64, description: "The bank transfer's reference, one line; unique per merchant" }),
});

export const SettlementResponse = Type.Object({
  settlementId: Type.String(),
  merchantId: Type.String(),
  amount: Type.Number(),
  currency: Type.String(),
  reference: Type.String(),
  createdAt: Type.String(),
});
