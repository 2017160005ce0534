import { type Static, Type } from 'typebox';

const Attempt = Type.Object({
  attemptedAt: Type.String(),
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  durationMs: Type.Integer(),
});
const Delivery = Type.Object({
  url: Type.String(),
  status: Type.String({ description: 'pending, delivered or failed' }),
  attempts: Type.Integer(),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  history: Type.Array(Attempt),
});
export type DeliveryView = Static<typeof Delivery>;
export const CallbackEvent = Type.Object({
  eventId: Type.String(),
  eventType: Type.String(),
  occurredAt: Type.String(),
  paymentIdentifier: Type.String(),
  body: Type.Unknown({ description: 'The exact callback body' }),
  deliveries: Type.Array(Delivery),
});

export type CallbackEventView = Static<typeof CallbackEvent>;
