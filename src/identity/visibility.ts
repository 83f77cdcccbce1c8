import type { Queryable } from "../stores/relational/types.js";
import type { Principal, Role } from "./principal.js";

/**
 * The one rule for which connections a caller may see, as a SQL condition on the
 * `connections` table aliased `alias`. Every REST route, MCP tool and job that asks
 * "which connections may this caller see" uses this function.
 *
 * - personal key: the user's personal connections plus every connection of every
 *   organization the user belongs to (any role);
 * - organization key: the connections of that one organization;
 * - usage-ingestion key: its one gateway connection.
 *
 * `param` appends a bind value and returns its placeholder.
 */
export function visibleConnectionsCondition(
  p: Principal,
  param: (v: unknown) => string,
  alias = "c",
): string {
  switch (p.kind) {
    case "personal": {
      const u = param(p.userId);
      return `((${alias}.organization_id IS NULL AND ${alias}.user_id = ${u}) OR ${alias}.organization_id IN (SELECT organization_id FROM memberships WHERE user_id = ${u}))`;
    }
    case "organization":
      return `${alias}.organization_id = ${param(p.organizationId)}`;
    case "usage_ingestion":
      return `${alias}.id = ${param(p.connectionId)}`;
  }
}

export type Access = "ok" | "absent" | "forbidden";

/** Whether the caller may see one connection: absent (404) and not visible (403) are told apart, as the spec asks. */
export async function connectionAccess(db: Queryable, p: Principal, connectionId: string): Promise<Access> {
  const params: unknown[] = [connectionId];
  const cond = visibleConnectionsCondition(p, (v) => {
    params.push(v);
    return `$${params.length}`;
  });
  const r = await db.query<{ visible: boolean }>(
    `SELECT ${cond} AS visible FROM connections c WHERE c.id = $1`,
    params,
  );
  const row = r.rows[0];
  if (!row) return "absent";
  return row.visible ? "ok" : "forbidden";
}

/** The user's role in an organization, or null when not a member. */
export async function roleIn(db: Queryable, userId: string, organizationId: string): Promise<Role | null> {
  const r = await db.query<{ role: Role }>(
    "SELECT role FROM memberships WHERE user_id = $1 AND organization_id = $2",
    [userId, organizationId],
  );
  return r.rows[0]?.role ?? null;
}

/**
 * Whether the caller may place a connection in `organizationId` (null = personal): a
 * personal key needs a role (member, admin or owner) there; an organization key may place
 * only in its own organization and never make a personal connection.
 */
export async function mayPlaceIn(
  db: Queryable,
  p: Principal,
  organizationId: string | null,
): Promise<string | null> {
  if (p.kind === "organization") {
    if (organizationId === p.organizationId) return null;
    return organizationId === null
      ? "An organization key cannot create personal connections"
      : "An organization key can only use its own organization";
  }
  if (p.kind !== "personal") return "This key cannot manage connections";
  if (organizationId === null) return null;
  const role = await roleIn(db, p.userId, organizationId);
  return role ? null : "You need the member, admin or owner role in that organization";
}

/** Access to several connections in one query (ingest of a batch that names many). */
export async function connectionsAccess(
  db: Queryable,
  p: Principal,
  ids: string[],
): Promise<Map<string, Access>> {
  const params: unknown[] = [ids];
  const cond = visibleConnectionsCondition(p, (v) => {
    params.push(v);
    return `$${params.length}`;
  });
  const r = await db.query<{ id: string; visible: boolean }>(
    `SELECT c.id, ${cond} AS visible FROM connections c WHERE c.id = ANY($1::text[])`,
    params,
  );
  const out = new Map<string, Access>(ids.map((id) => [id, "absent" as Access]));
  for (const row of r.rows) out.set(row.id, row.visible ? "ok" : "forbidden");
  return out;
}

/** Ids of every connection the caller may see (for series reads, which filter by connection). */
export async function visibleConnectionIds(db: Queryable, p: Principal): Promise<string[]> {
  const params: unknown[] = [];
  const cond = visibleConnectionsCondition(p, (v) => {
    params.push(v);
    return `$${params.length}`;
  });
  const r = await db.query<{ id: string }>(`SELECT c.id FROM connections c WHERE ${cond}`, params);
  return r.rows.map((row) => row.id);
}
