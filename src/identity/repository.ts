import type { Actor, Permission, Role } from "../core/actor.js";
import type { Queryable } from "../stores/relational/types.js";
import type { Plan } from "./plans.js";

/**
 * The one rule for which connections a caller may see, as a SQL condition on the
 * `connections` table aliased `alias`. Every REST route, MCP tool and job that asks
 * "which connections may this caller see" uses this function.
 *
 * - personal key and signed-in user (OAuth token, dashboard session): the user's personal
 *   connections plus every connection of every organization the user belongs to (any role);
 * - organization key: the connections of that one organization;
 * - usage-ingestion key: its one gateway connection;
 * - the system (jobs): every connection.
 *
 * `param` appends a bind value and returns its placeholder.
 */
export function visibleConnectionsCondition(p: Actor, param: (v: unknown) => string, alias = "c"): string {
  const ofUser = (userId: string) => {
    const u = param(userId);
    return `((${alias}.organization_id IS NULL AND ${alias}.user_id = ${u}) OR ${alias}.organization_id IN (SELECT organization_id FROM memberships WHERE user_id = ${u}))`;
  };
  switch (p.type) {
    case "api_key":
      return p.scope === "organization"
        ? `${alias}.organization_id = ${param(p.organizationId)}`
        : ofUser(p.userId);
    case "user":
      return ofUser(p.userId);
    case "ingestion_key":
      return `${alias}.id = ${param(p.connectionId)}`;
    case "system":
      return "TRUE";
  }
}

/**
 * Every statement on users, organizations, memberships and API keys, and the visibility
 * queries on connections. Each function takes a `Queryable`: the store, or a transaction the
 * caller holds open. The visibility rule itself is `visibleConnectionsCondition`
 * (visibility.ts); queries here receive it as `visible`, a builder of its SQL condition.
 */

/** Builds a SQL condition on `connections c`, appending bind values through `param`. */
export type ConditionBuilder = (param: (v: unknown) => string) => string;

/** Bind values and `param`, which appends one and returns its placeholder. */
function binder(initial: unknown[] = []) {
  const params = [...initial];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

// --- visibility of connections ---

/** Whether a connection is visible under `visible`; undefined when it does not exist. */
export async function connectionVisible(
  db: Queryable,
  connectionId: string,
  visible: ConditionBuilder,
): Promise<boolean | undefined> {
  const { params, param } = binder([connectionId]);
  const r = await db.query<{ visible: boolean }>(
    `SELECT ${visible(param)} AS visible FROM connections c WHERE c.id = $1`,
    params,
  );
  return r.rows[0]?.visible;
}

/** Which of these connections exist, and whether each is visible under `visible`. */
export async function connectionsVisible(
  db: Queryable,
  ids: string[],
  visible: ConditionBuilder,
): Promise<{ id: string; visible: boolean }[]> {
  const { params, param } = binder([ids]);
  const r = await db.query<{ id: string; visible: boolean }>(
    `SELECT c.id, ${visible(param)} AS visible FROM connections c WHERE c.id = ANY($1::text[])`,
    params,
  );
  return r.rows;
}

/** Ids of every connection visible under `visible`. */
export async function visibleIds(db: Queryable, visible: ConditionBuilder): Promise<string[]> {
  const { params, param } = binder();
  const r = await db.query<{ id: string }>(`SELECT c.id FROM connections c WHERE ${visible(param)}`, params);
  return r.rows.map((row) => row.id);
}

/**
 * One page of the ids visible under `visible`, in byte order of the id (`COLLATE "C"`, the order
 * JavaScript compares strings in, whatever the database's collation), strictly after `after`
 * (ascending) or before it (descending). Reads over many connections walk these pages so that
 * each series statement names one page of connections, never every visible one.
 */
export async function visibleIdsPage(
  db: Queryable,
  visible: ConditionBuilder,
  q: { after?: string; order: "asc" | "desc"; limit: number },
): Promise<string[]> {
  const { params, param } = binder();
  const conds = [visible(param)];
  if (q.after !== undefined)
    conds.push(`c.id COLLATE "C" ${q.order === "asc" ? ">" : "<"} ${param(q.after)} COLLATE "C"`);
  const r = await db.query<{ id: string }>(
    `SELECT c.id FROM connections c WHERE ${conds.join(" AND ")}
      ORDER BY c.id COLLATE "C" ${q.order === "asc" ? "ASC" : "DESC"} LIMIT ${param(Math.max(1, Math.trunc(q.limit)))}`,
    params,
  );
  return r.rows.map((row) => row.id);
}

/**
 * `visibleIdsPage` for a user's view (a signed-in user, a personal API key): the same page, asked
 * as one ordered index range per source of connections (the user's personal ones, then each
 * organization the user belongs to), each stopping at `limit`, merged. The single condition
 * `visible` ORs the sources, which PostgreSQL can only answer by reading and sorting every visible
 * connection (7 ms a page at 10,000; this form reads the page: 0.7 ms). Each branch still applies
 * `visible` itself, so the rule stays the one in `visibleConnectionsCondition`.
 */
export async function userVisibleIdsPage(
  db: Queryable,
  userId: string,
  visible: ConditionBuilder,
  q: { after?: string; order: "asc" | "desc"; limit: number },
): Promise<string[]> {
  const { params, param } = binder();
  const u = param(userId);
  const dir = q.order === "asc" ? "ASC" : "DESC";
  const limit = param(Math.max(1, Math.trunc(q.limit)));
  const after =
    q.after === undefined
      ? ""
      : ` AND c.id COLLATE "C" ${q.order === "asc" ? ">" : "<"} ${param(q.after)} COLLATE "C"`;
  const rule = visible(param);
  const r = await db.query<{ id: string }>(
    `SELECT id FROM (
       (SELECT c.id FROM connections c
         WHERE c.organization_id IS NULL AND c.user_id = ${u}${after} AND ${rule}
         ORDER BY c.id COLLATE "C" ${dir} LIMIT ${limit})
       UNION ALL
       (SELECT o.id FROM memberships m CROSS JOIN LATERAL (
          SELECT c.id FROM connections c
           WHERE c.organization_id = m.organization_id${after} AND ${rule}
           ORDER BY c.id COLLATE "C" ${dir} LIMIT ${limit}) o
         WHERE m.user_id = ${u})
     ) page ORDER BY id COLLATE "C" ${dir} LIMIT ${limit}`,
    params,
  );
  return r.rows.map((row) => row.id);
}

// --- users, organizations, memberships ---

export async function userExists(db: Queryable, id: string): Promise<boolean> {
  const r = await db.query("SELECT 1 FROM users WHERE id = $1", [id]);
  return r.rows.length > 0;
}

export async function organizationExists(db: Queryable, id: string): Promise<boolean> {
  const r = await db.query("SELECT 1 FROM organizations WHERE id = $1", [id]);
  return r.rows.length > 0;
}

/** Inserts a user; a taken e-mail fails with the driver's unique violation (23505). */
export async function insertUser(
  db: Queryable,
  u: { id: string; email: string; passwordHash: string | null; plan: Plan },
): Promise<void> {
  await db.query("INSERT INTO users (id, email, password_hash, plan) VALUES ($1, $2, $3, $4)", [
    u.id,
    u.email,
    u.passwordHash,
    u.plan,
  ]);
}

export async function insertOrganization(
  db: Queryable,
  o: { id: string; name: string; plan: Plan },
): Promise<void> {
  await db.query("INSERT INTO organizations (id, name, plan) VALUES ($1, $2, $3)", [o.id, o.name, o.plan]);
}

/** Gives the user the role in the organization, replacing any role held there. */
export async function putMembership(
  db: Queryable,
  m: { organizationId: string; userId: string; role: Role },
): Promise<void> {
  await db.query(
    `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)
     ON CONFLICT (organization_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
    [m.organizationId, m.userId, m.role],
  );
}

/** The user's role in an organization, or null when not a member. */
export async function membershipRole(
  db: Queryable,
  userId: string,
  organizationId: string,
): Promise<Role | null> {
  const r = await db.query<{ role: Role }>(
    "SELECT role FROM memberships WHERE user_id = $1 AND organization_id = $2",
    [userId, organizationId],
  );
  return r.rows[0]?.role ?? null;
}

/** The plan of an organization (when given) or else of a user; undefined when not found. */
export async function accountPlan(
  db: Queryable,
  account: { userId: string; organizationId: string | null },
): Promise<Plan | undefined> {
  const r = account.organizationId
    ? await db.query<{ plan: Plan }>("SELECT plan FROM organizations WHERE id = $1", [account.organizationId])
    : await db.query<{ plan: Plan }>("SELECT plan FROM users WHERE id = $1", [account.userId]);
  return r.rows[0]?.plan;
}

/** A user's plan and own rate limit (null: the plan's), or undefined when the user is gone. */
export async function userRateRow(
  db: Queryable,
  userId: string,
): Promise<{ plan: Plan; rate_limit_per_hour: number | null } | undefined> {
  const r = await db.query<{ plan: Plan; rate_limit_per_hour: number | null }>(
    "SELECT plan, rate_limit_per_hour FROM users WHERE id = $1",
    [userId],
  );
  return r.rows[0];
}

// --- API keys ---

/** How a key is stored: personal, bound to one organization, or bound to one gateway (usage-ingestion). */
export type KeyKind = "personal" | "organization" | "usage_ingestion";

/** A key to mint: whose, what kind, bound to which organization or gateway connection. */
export interface NewKey {
  id: string;
  userId: string;
  kind: KeyKind;
  organizationId?: string | null;
  connectionId?: string | null;
  name?: string | null;
  permissions: Permission[];
}

/** Stores a key: only its hash, and the first characters to tell keys apart in lists. */
export async function insertKeyRow(
  tx: Queryable,
  k: NewKey & { displayPrefix: string; keyHash: string },
): Promise<void> {
  await tx.query(
    `INSERT INTO api_keys (id, user_id, kind, organization_id, connection_id, name, display_prefix, key_hash, permissions)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      k.id,
      k.userId,
      k.kind,
      k.organizationId ?? null,
      k.connectionId ?? null,
      k.name ?? null,
      k.displayPrefix,
      k.keyHash,
      k.permissions,
    ],
  );
}

/** A key with what authentication needs: its owner's and organization's plan and limits. */
export interface KeyRow extends Record<string, unknown> {
  id: string;
  user_id: string;
  kind: KeyKind;
  organization_id: string | null;
  connection_id: string | null;
  permissions: Permission[];
  revoked_at: Date | null;
  user_plan: Plan;
  user_limit: number | null;
  org_plan: Plan | null;
  org_limit: number | null;
  /** False when an organization key's user has left the organization. */
  still_member: boolean;
}

const KEY_BY_HASH = `
  SELECT k.id, k.user_id, k.kind, k.organization_id, k.connection_id, k.permissions, k.revoked_at,
         u.plan AS user_plan, u.rate_limit_per_hour AS user_limit,
         o.plan AS org_plan, o.rate_limit_per_hour AS org_limit,
         (k.organization_id IS NULL OR EXISTS (
            SELECT 1 FROM memberships m WHERE m.organization_id = k.organization_id AND m.user_id = k.user_id
         )) AS still_member
    FROM api_keys k
    JOIN users u ON u.id = k.user_id
    LEFT JOIN organizations o ON o.id = k.organization_id
   WHERE k.key_hash = $1`;

export async function keyByHash(db: Queryable, keyHash: string): Promise<KeyRow | undefined> {
  const r = await db.query<KeyRow>(KEY_BY_HASH, [keyHash]);
  return r.rows[0];
}

/** Records when keys were last used; a later time already stored is kept. */
export async function recordKeysLastUsed(db: Queryable, used: readonly [string, Date][]): Promise<void> {
  await db.query(
    `UPDATE api_keys SET last_used_at = v.t
       FROM (SELECT unnest($1::text[]) AS id, unnest($2::timestamptz[]) AS t) v
      WHERE api_keys.id = v.id AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < v.t)`,
    [used.map(([id]) => id), used.map(([, t]) => t.toISOString())],
  );
}

/** Revokes a key at `at` (a key revoked earlier keeps its time); false when there is no such key. */
export async function revokeKeyRow(db: Queryable, id: string, at: Date): Promise<boolean> {
  const r = await db.query("UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1", [
    id,
    at.toISOString(),
  ]);
  return r.rowCount > 0;
}
