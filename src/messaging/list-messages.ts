import type { Kysely } from 'kysely';
import { beyond } from '../db/keyset.js';
import type { Database } from '../db/schema.js';
import type { SortKey } from '../http/pagination.js';

/**
 * A merchant's messages, newest first, `limit` of them from beyond `after` (exported for the
 * test of its plan): a range of messages_merchant (merchant_id, created_at).
 */
export function merchantMessagesQuery(db: Kysely<Database>, merchantId: string, limit: number, after: SortKey | undefined) {
  let query = db.selectFrom('messages').selectAll().where('merchant_id', '=', merchantId);
  if (after !== undefined) query = query.where(beyond('created_at', 'id', after, 'desc'));
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit);
}
