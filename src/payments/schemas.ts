import { Type } from 'typebox';
import { httpUrl, httpUrlDocumented } from '../http/schemas.js';
import { CURRENCY } from '../ledger/money.js';

/** The currencies a payment may be in (CONTRACT §6: KES only by default). */
export const SUPPORTED_CURRENCIES: readonly string[] = [CURRENCY];

/** The most one payment may be, in major units (CONTRACT §6). */
export const MAX_PAYMENT = 250_000;

const AMOUNT = 'Major units, > 0, at most 2 decimals, at most 250000';
const CALLBACK_URL = 'Receives the signed payment.status_changed callbacks';
const SUCCESS_REDIRECT_URL = 'Where the hosted payment page sends the consumer after success';

/** Endpoint 5's body. Required and optional fields as CONTRACT §6 decides. */
export const CreatePaymentBody = Type.Object({
  terminalId: Type.String({ minLength: 1, maxLength: 64 }),
  currency: Type.String({ minLength: 1, maxLength: 8, description: 'ISO 4217 code; KES is supported' }),
  amount: Type.Number({ description: AMOUNT }),
  merchantStika: Type.Optional(Type.String({ maxLength: 64, description: 'Currency code, underscore, digits: KES_123456' })),
  orderId: Type.String({
    minLength: 1,
    maxLength: 128,
    description: 'One line, not only spaces: no control characters; with terminalId, the idempotency key',
  }),
  description: Type.Optional(Type.String({ maxLength: 500, description: 'Free text: no control characters but tab and line breaks' })),
  payer: Type.Object({
    method: Type.String({ description: 'phone' }),
    value: Type.String({ description: 'Phone digits with country code, no plus: 8 to 15 digits' }),
  }),
  urls: Type.Object({
    callbackUrl: httpUrl(CALLBACK_URL),
    successRedirectUrl: Type.Optional(httpUrl(SUCCESS_REDIRECT_URL)),
  }),
});

/**
 * The same body as /openapi.json describes it: with the amount's bounds (OpenAPI 3.0's form),
 * the supported currency, and the forms of merchantStika, the payer and the URLs, so that a client made
 * from the description sends what the service takes. The handler checks these rather than the
 * schema validator, so that one 422 names every field at fault.
 */
export const CreatePaymentBodyDocumented = Type.Object({
  ...CreatePaymentBody.properties,
  currency: Type.Unsafe<string>({ type: 'string', enum: [...SUPPORTED_CURRENCIES], description: 'ISO 4217 code' }),
  amount: Type.Unsafe<number>({ type: 'number', minimum: 0, exclusiveMinimum: true, maximum: MAX_PAYMENT, description: AMOUNT }),
  merchantStika: Type.Optional(
    Type.String({
      maxLength: 64,
      pattern: '^[A-Z]{3}_[0-9]+$',
      description: "The payment's own currency (the pattern cannot say so), underscore, digits: KES_123456",
    }),
  ),
  payer: Type.Object({
    method: Type.Unsafe<string>({ type: 'string', enum: ['phone'] }),
    value: Type.String({ pattern: '^[0-9]{8,15}$', description: 'Phone digits with country code, no plus: 8 to 15 digits' }),
  }),
  urls: Type.Object({
    callbackUrl: httpUrlDocumented(CALLBACK_URL),
    successRedirectUrl: Type.Optional(httpUrlDocumented(SUCCESS_REDIRECT_URL)),
  }),
});

export const StatusBody = Type.Object({
  paymentIdentifier: Type.String({ minLength: 1 }),
});

/** The seed's payment statuses. */
export const PaymentStatusSchema = Type.Union([
  Type.Literal('pending'),
  Type.Literal('no_user'),
  Type.Literal('paid'),
  Type.Literal('declined'),
  Type.Literal('expired'),
]);

export const Payment = Type.Object({
  paymentIdentifier: Type.String(),
  status: PaymentStatusSchema,
  reason: Type.Optional(Type.String({ description: 'Only when declined: declined_by_payer, insufficient_funds or cancelled_by_merchant' })),
  terminalId: Type.String(),
  orderId: Type.String(),
  amount: Type.Number(),
  refundedAmount: Type.Number({ description: 'Refunded so far, in major units: 0 when nothing was (a refund leaves the status paid)' }),
  currency: Type.String(),
  merchantStika: Type.Union([Type.String(), Type.Null()]),
  description: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  expiresAt: Type.String(),
  paymentUrl: Type.String(),
});

export const SignedHeaders = Type.Object({
  'x-service-key-id': Type.String(),
  'x-service-nonce': Type.String(),
  'x-service-timestamp': Type.String(),
  'x-service-hash': Type.String(),
  'x-service-signature': Type.String(),
});
