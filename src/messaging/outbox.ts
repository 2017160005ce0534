import type { AppContext } from '../context.js';
import type { MessageTable } from '../db/schema.js';
import { isoTime } from '../http/time.js';
import { hideCodes, holdsCode, readText } from './login-codes.js';

/**
 * Every message the service stored, newest first, as operators read them (GET
 * /api/v1/admin/outbox): the embedded outbox's deliveries, and what real transports sent.
 */
export async function listOutbox(ctx: AppContext, limit: number) {
  const rows = await ctx.store.db
    .selectFrom('messages')
    .selectAll()
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map((m) => ({
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
