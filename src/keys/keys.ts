import { randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { AppError, shown } from '../http/errors.js';
import { isoTime, isoTimeOrNull } from '../http/time.js';
import { assertNotSuspended } from '../merchants/suspension.js';
import { randomId, randomSecret, sha256Hex } from '../security/tokens.js';

/**
 * The most unrevoked keys of each kind a merchant may hold. Rate limits count per key, so a
 * merchant with unlimited keys would have unlimited rate; 25 leave room for one key per shop
 * or server and for rotation (create the new key, deploy it, revoke the old one).
 */
export const MAX_ACTIVE_KEYS = 25;

/**
 * Refuses a new key when the merchant is suspended or already holds MAX_ACTIVE_KEYS unrevoked
 * ones. The merchant's row is locked first on PostgreSQL (assertNotSuspended), so two
 * concurrent creations cannot both count 24 (SQLite runs one writer at a time).
 */
async function assertRoomForKey(ctx: AppContext, tx: Tx, table: 'api_keys' | 'messaging_keys', merchantId: string) {
  await assertNotSuspended(ctx, tx, merchantId);
  const { n } = await tx
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('merchant_id', '=', merchantId)
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  if (Number(n) >= MAX_ACTIVE_KEYS) {
    const kind = table === 'api_keys' ? 'signing' : 'messaging';
    throw new AppError(
      'too_many_keys',
      `You already have ${MAX_ACTIVE_KEYS} ${kind} keys that are not revoked, the most allowed; revoke one first.`,
    );
  }
}

/**
 * Step 0 of the merchant checklist: a signing key pair. The secret is 32 random bytes shown
 * once as 64 hex digits and kept encrypted (AES-256-GCM, bound to the key id) so that the
 * service can verify and sign with it later.
 */
export async function createApiKey(ctx: AppContext, merchantId: string, name: string | null) {
  const keyId = randomId('key_');
  const secret = randomBytes(32).toString('hex');
  const now = ctx.now();
  await ctx.store.write(async (tx) => {
    await assertRoomForKey(ctx, tx, 'api_keys', merchantId);
    await tx
      .insertInto('api_keys')
      .values({
        id: keyId,
        merchant_id: merchantId,
        name,
        secret_enc: ctx.secretBox.seal(secret, keyId),
        created_at: now,
        revoked_at: null,
      })
      .execute();
  });
  return { keyId, secret, name, createdAt: isoTime(now) };
}

export async function listApiKeys(ctx: AppContext, merchantId: string) {
  const rows = await ctx.store.db
    .selectFrom('api_keys')
    .select(['id', 'name', 'created_at', 'revoked_at'])
    .where('merchant_id', '=', merchantId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map((r) => ({ keyId: r.id, name: r.name, createdAt: isoTime(r.created_at), revokedAt: isoTimeOrNull(r.revoked_at) }));
}

/** Revokes a key; revoking an already revoked key is a no-op. Another merchant's key is 404. */
export async function revokeApiKey(ctx: AppContext, merchantId: string, keyId: string): Promise<void> {
  const now = ctx.now();
  const found = await ctx.store.write(async (tx) => {
    const row = await tx
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('id', '=', keyId)
      .where('merchant_id', '=', merchantId)
      .executeTakeFirst();
    if (row && row.revoked_at === null) await tx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).execute();
    return row !== undefined;
  });
  if (!found) throw new AppError('not_found', `No signing key ${shown(keyId)}.`);
}

/** A messaging API key (the api_key header). Stored as SHA-256 only: it is never shown again. */
export async function createMessagingKey(ctx: AppContext, merchantId: string, name: string | null) {
  const id = randomId('mk_');
  const apiKey = randomSecret('lipa_msg_');
  const now = ctx.now();
  await ctx.store.write(async (tx) => {
    await assertRoomForKey(ctx, tx, 'messaging_keys', merchantId);
    await tx
      .insertInto('messaging_keys')
      .values({
        id,
        merchant_id: merchantId,
        name,
        key_hash: sha256Hex(apiKey),
        key_prefix: apiKey.slice(0, 14),
        created_at: now,
        revoked_at: null,
      })
      .execute();
  });
  return { id, apiKey, name, createdAt: isoTime(now) };
}

export async function listMessagingKeys(ctx: AppContext, merchantId: string) {
  const rows = await ctx.store.db
    .selectFrom('messaging_keys')
    .select(['id', 'name', 'key_prefix', 'created_at', 'revoked_at'])
    .where('merchant_id', '=', merchantId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    prefix: r.key_prefix,
    createdAt: isoTime(r.created_at),
    revokedAt: isoTimeOrNull(r.revoked_at),
  }));
}

export async function revokeMessagingKey(ctx: AppContext, merchantId: string, id: string): Promise<void> {
  const now = ctx.now();
  const found = await ctx.store.write(async (tx) => {
    const row = await tx
      .selectFrom('messaging_keys')
      .select('revoked_at')
      .where('id', '=', id)
      .where('merchant_id', '=', merchantId)
      .executeTakeFirst();
    if (row && row.revoked_at === null) await tx.updateTable('messaging_keys').set({ revoked_at: now }).where('id', '=', id).execute();
    return row !== undefined;
  });
  if (!found) throw new AppError('not_found', `No messaging key ${shown(id)}.`);
}
