import type { Tx } from '../db/database.js';
import { hotQuery } from '../db/hot-query.js';
import type { MessageTable } from '../db/schema.js';

/** Stores a prepared message row in the caller's transaction (the transactional outbox). */
export async function insertMessage(tx: Tx, row: MessageTable): Promise<void> {
  await hotQuery(tx, 'messages.insert', Object.values(row), () => tx.insertInto('messages').values(row));
}
