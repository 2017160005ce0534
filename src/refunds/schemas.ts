import { Type } from 'typebox';
import { MAX_PAYMENT } from '../payments/schemas.js';

const AMOUNT = `Major units, > 0, at most 2 decimals, at most what is still refundable; default all of it`;

/** A refund request (CONTRACT §11). */
export const CreateRefundBody = Type.Object({
  paymentIdentifier: Type.String({ minLength: 1, maxLength: 200 }),
  refundReference: Type.String({
    minLength: 1,
    maxLength: 64,
    description: "The merchant's own reference, one line, not only spaces; the idempotency key of the refund",
  }),
  amount: Type.Optional(Type.Number({ description: AMOUNT })),
  reason: Type.Optional(Type.String({ maxLength: 200, description: 'Free text, one line: no control characters' })),
});

/** The same body as /openapi.json describes it: the amount's bounds, which the handler checks. */
export const CreateRefundBodyDocumented = Type.Object({
  ...CreateRefundBody.properties,
  amount: Type.Optional(
    Type.Unsafe<number>({ type: 'number', minimum: 0, exclusiveMinimum: true, maximum: MAX_PAYMENT, description: AMOUNT }),
  ),
});

export const RefundStatusBody = Type.Object({
  refundIdentifier: Type.String({ minLength: 1 }),
});

export const Refund = Type.Object({
  refundIdentifier: Type.String(),
  paymentIdentifier: Type.String(),
  refundReference: Type.String(),
  amount: Type.Number({ description: 'Major units' }),
  currency: Type.String(),
  status: Type.Literal('succeeded'),
  reason: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
});
