import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import { CreatePaymentBody } from '../src/payments/schemas.js';

/**
 * The baseline: a bare Fastify server answering a POST of the same body with the same
 * schema validation, and nothing else (no database, no signature, no logging).
 */
const app = Fastify({ logger: false }).withTypeProvider<TypeBoxTypeProvider>();
app.post('/api/public/v1/merchant-payments', { schema: { body: CreatePaymentBody } }, async (request, reply) =>
  reply.code(201).send({ paymentIdentifier: 'pay_baseline', status: 'pending', orderId: request.body.orderId }),
);
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`listening ${(app.server.address() as { port: number }).port}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
