import { Type } from 'typebox';
import { CursorParam, LimitParam } from '../http/pagination.js';

export const Wallet = Type.Object({ phone: Type.String(), balance: Type.Number(), currency: Type.String() });

export const WalletPayment = Type.Object({
  paymentIdentifier: Type.String(),
  status: Type.String(),
  reason: Type.Optional(Type.String()),
  merchantName: Type.String(),
  orderId: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  amount: Type.Number(),
  refundedAmount: Type.Number({ description: 'Given back to the wallet by the merchant so far, in major units: 0 when nothing was' }),
  currency: Type.String(),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  expiresAt: Type.String(),
});

export const WalletPaymentsQuery = Type.Object({
  status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('paid'), Type.Literal('declined'), Type.Literal('expired')])),
  limit: LimitParam,
  cursor: CursorParam,
});

export const PaymentParams = Type.Object({ paymentIdentifier: Type.String() });
export const AcceptBody = Type.Object({ pin: Type.String({ minLength: 1, maxLength: 32 }) });
export const Answer = Type.Object({ status: Type.String(), reason: Type.Optional(Type.String()) });
