import type { Kysely } from 'kysely';
import type { AppContext } from '../context.js';
import { beyond, createdKey, startOf } from '../db/keyset.js';
import type { Database, MessageTable } from '../db/schema.js';
import { limitOf, type PageQuery, type SortKey } from '../http/pagination.js';
import { isoTime } from '../http/time.js';
import { hideCodes, holdsCode, readText } from './login-codes.js';

/**
 * Every message the service stored, newest first, as operators read them (GET
 * /api/v1/admin/outbox): the embedded outbox's deliveries, and what real transports sent.
 */
export async function listOutbox(ctx: AppContext, query: PageQuery) {
  const scope = 'admin:outbox';
  const limit = limitOf(query.limit);
  const rows = await outboxQuery(ctx.store.db, limit + 1, startOf(ctx.cursors, scope, query.cursor)).execute();
  return ctx.cursors.page(scope, rows, limit, createdKey, (m) => ({
    id: m.id,
    type: m.type,
    purpose: m.purpose,
    to: m.type === 'email' ? (m.email ?? '') : `${m.phone_country_code ?? ''}${m.phone_number ?? ''}`,
    subject: m.subject,
    contentType: m.content_type,
    content: shownText(ctx, m),
    status: m.status,
    createdAt: isoTime(m.created_at),
  }));
}

/** listOutbox's query: a range of messages_created (exported for the test of its plan). */
export function outboxQuery(db: Kysely<Database>, limit: number, after?: SortKey) {
  let query = db.selectFrom('messages').selectAll();
  if (after !== undefined) query = query.where(beyond('created_at', 'id', after, 'desc'));
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit);
}

/** Staging testers read login codes here; in production no operator may read one. */
function shownText(ctx: AppContext, m: MessageTable): string {
  if (!holdsCode(m.purpose)) return m.content;
  let text: string;
  try {
    text = readText(ctx.secretBox, m);
  } catch {
    return '(a login code sealed under another LIPA_MASTER_KEY)';
  }
  return ctx.config.env === 'production' ? hideCodes(text) : text;
}
