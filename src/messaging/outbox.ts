import type { AppContext } from '../context.js';
import { isoTime } from '../http/time.js';
import { hideCodes } from './messenger.js';

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
    // Staging testers read login codes here; in production no operator may read one.
    content: m.purpose === 'otp' && ctx.config.env === 'production' ? hideCodes(m.content) : m.content,
    status: m.status,
    createdAt: isoTime(m.created_at),
  }));
}
