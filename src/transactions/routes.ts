import { Readable } from 'node:stream';
import type { AppContext } from '../context.js';
import { principalOf, requireSession } from '../http/bearer.js';
import { limitOf } from '../http/pagination.js';
import { bearerAuth, errors } from '../http/schemas.js';
import type { App } from '../http/types.js';
import { SignedHeaders } from '../payments/schemas.js';
import { signedRoute, signerOf } from '../payments/signed-request.js';
import { Balance, BalanceBody, StatementQuery, TransactionPage, TransactionsBody, TransactionsQuery } from './schemas.js';
import { CSV_COLUMNS, csvLine, inertCell, listTransactions, merchantBalance, statementChunks } from './statement.js';

/** The merchant's balance and statement (CONTRACT §12): signed for its servers, bearer for the dashboard. */
export function registerTransactionRoutes(app: App, ctx: AppContext): void {
  const signed = signedRoute(ctx);
  const tags = ['Balance and transactions'];
  const signedSecurity = [{ signedRequest: [] }];
  const session = { onRequest: requireSession(ctx, 'merchant') };

  app.post(
    '/api/public/v1/balance',
    {
      ...signed,
      schema: {
        tags,
        security: signedSecurity,
        summary: "The merchant's balance (signed)",
        headers: SignedHeaders,
        body: BalanceBody,
        response: { 200: Balance, ...errors(403, 422, 429) },
      },
    },
    async (request) => merchantBalance(ctx, signerOf(request).merchantId),
  );

  app.get(
    '/api/v1/balance',
    {
      ...session,
      schema: { tags, security: bearerAuth, summary: "The merchant's balance", response: { 200: Balance, ...errors(401, 403) } },
    },
    async (request) => merchantBalance(ctx, principalOf(request).id),
  );

  app.post(
    '/api/public/v1/transactions',
    {
      ...signed,
      schema: {
        tags,
        security: signedSecurity,
        summary: "The merchant's statement, newest first, a page at a time (signed)",
        headers: SignedHeaders,
        body: TransactionsBody,
        response: { 200: TransactionPage, ...errors(403, 422, 429) },
      },
    },
    async (request) => {
      const { limit, ...filter } = request.body;
      return listTransactions(ctx, signerOf(request).merchantId, { ...filter, limit: limitOf(limit) });
    },
  );

  app.get(
    '/api/v1/transactions',
    {
      ...session,
      schema: {
        tags,
        security: bearerAuth,
        summary: "The merchant's statement, newest first, a page at a time",
        querystring: TransactionsQuery,
        response: { 200: TransactionPage, ...errors(401, 403, 422) },
      },
    },
    async (request) => {
      const { limit, ...filter } = request.query;
      return listTransactions(ctx, principalOf(request).id, { ...filter, limit: limitOf(limit) });
    },
  );

  app.get(
    '/api/v1/transactions.csv',
    {
      ...session,
      schema: {
        tags,
        security: bearerAuth,
        summary: 'The statement of a range as CSV, oldest first (RFC 4180, streamed)',
        querystring: StatementQuery,
        response: {
          200: { description: `CSV with a header row: ${CSV_COLUMNS.join(',')}`, content: { 'text/csv': { schema: { type: 'string' } } } },
          ...errors(401, 403, 422),
        },
      },
    },
    async (request, reply) => {
      const merchantId = principalOf(request).id;
      const chunks = statementChunks(ctx, merchantId, request.query);
      // The range's first read runs before the answer starts, so a bad range is still a 422.
      const first = await chunks.next();
      // One write a chunk of entries (a write a line would cost more than the lines).
      async function* text() {
        yield csvLine(CSV_COLUMNS);
        for (let chunk: typeof first = first; !chunk.done; chunk = await chunks.next()) {
          let lines = '';
          for (const t of chunk.value)
            lines += csvLine([
              t.transactionId,
              t.type,
              t.amount,
              t.currency,
              t.balanceAfter,
              t.reference,
              inertCell(t.orderId),
              t.occurredAt,
            ]);
          yield lines;
        }
      }
      return (
        reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', 'attachment; filename="transactions.csv"')
          // Fastify streams a Readable with back-pressure; the schema types the body as the text it becomes.
          .send(Readable.from(text(), { highWaterMark: 1 }) as unknown as string)
      );
    },
  );
}
