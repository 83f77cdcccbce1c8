import type { Permission, Role } from "../core/actor.js";
import type { Queryable } from "../stores/relational/types.js";
import type { KeyKind } from "./repository.js";

/**
 * The statements of key management by a signed-in user (key-service.ts): a user's keys with what
 * a list shows, one of them for a revocation, and the user's organizations with their roles.
 * Creating and revoking rows reuse `insertKeyRow` and `revokeKeyRow` (repository.ts).
 */

/** A key as its list shows it: never the key, only its first characters. */
export interface ListedKeyRow extends Record<string, unknown> {
  id: string;
  kind: KeyKind;
  name: string | null;
  display_prefix: string;
  permissions: Permission[];
  organization_id: string | null;
  organization_name: string | null;
  connection_id: string | null;
  connection_name: string | null;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** The user's keys (every kind), active ones first, newest first; at most `limit`. */
export async function keysOfUser(db: Queryable, userId: string, limit: number): Promise<ListedKeyRow[]> {
  const r = await db.query<ListedKeyRow>(
    `SELECT k.id, k.kind, k.name, k.display_prefix, k.permissions, k.organization_id,
            o.name AS organization_name, k.connection_id, c.service_name AS connection_name,
            k.created_at, k.last_used_at, k.revoked_at
       FROM api_keys k
       LEFT JOIN organizations o ON o.id = k.organization_id
       LEFT JOIN connections c ON c.id = k.connection_id
      WHERE k.user_id = $1
      ORDER BY (k.revoked_at IS NULL) DESC, k.created_at DESC, k.id
      LIMIT $2`,
    [userId, limit],
  );
  return r.rows;
}

/** One key of the user's, locked for the caller's transaction; undefined when the user has no such key. */
export async function ownKeyForUpdate(
  tx: Queryable,
  userId: string,
  keyId: string,
): Promise<{ id: string; revoked_at: Date | null } | undefined> {
  const r = await tx.query<{ id: string; revoked_at: Date | null }>(
    "SELECT id, revoked_at FROM api_keys WHERE id = $1 AND user_id = $2 FOR UPDATE",
    [keyId, userId],
  );
  return r.rows[0];
}

/** The organizations the user belongs to, with the user's role there, by name. */
export async function membershipsOfUser(
  db: Queryable,
  userId: string,
): Promise<{ id: string; name: string; role: Role }[]> {
  const r = await db.query<{ id: string; name: string; role: Role }>(
    `SELECT o.id, o.name, m.role
       FROM memberships m JOIN organizations o ON o.id = m.organization_id
      WHERE m.user_id = $1
      ORDER BY lower(o.name), o.id`,
    [userId],
  );
  return r.rows;
}
