import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { SubjectType } from '../db/schema.js';

/** The Fastify instance with TypeBox types: a route's schema types its handler. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface Principal {
  type: SubjectType;
  id: string;
  /** The session the bearer token opened (log out ends it). */
  sessionId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the bearer-token guard on routes that need a merchant or payer session. */
    principal: Principal | null;
  }
}
