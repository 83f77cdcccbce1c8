import type { Queryable } from "../stores/relational/types.js";
import type { Actor, ApiKeyActor, Role, UserActor } from "../core/actor.js";
import { forbidden } from "../core/errors.js";
import {
  connectionsVisible,
  connectionVisible,
  membershipRole,
  visibleConnectionsCondition,
  visibleIds,
  userVisibleIdsPage,
  visibleIdsPage,
} from "./repository.js";

/*
 * Who may see which connection is decided in one place for every kind of caller: the SQL
 * condition `visibleConnectionsCondition` (identity/repository.ts, beside the queries that use
 * it). The functions below answer the questions the verbs ask with it.
 */

export type Access = "ok" | "absent" | "forbidden";

/** Whether the caller may see one connection: absent (404) and not visible (403) are told apart, as the spec asks. */
export async function connectionAccess(db: Queryable, p: Actor, connectionId: string): Promise<Access> {
  const visible = await connectionVisible(db, connectionId, (param) => visibleConnectionsCondition(p, param));
  if (visible === undefined) return "absent";
  return visible ? "ok" : "forbidden";
}

/** The user's role in an organization, or null when not a member. */
export const roleIn = (db: Queryable, userId: string, organizationId: string): Promise<Role | null> =>
  membershipRole(db, userId, organizationId);

/**
 * Whether the caller may place a connection in `organizationId` (null = personal): a
 * personal key needs a role (member, admin or owner) there; an organization key may place
 * only in its own organization and never make a personal connection.
 */
export async function mayPlaceIn(
  db: Queryable,
  p: Actor,
  organizationId: string | null,
): Promise<string | null> {
  if (p.type === "api_key" && p.scope === "organization") {
    if (organizationId === p.organizationId) return null;
    return organizationId === null
      ? "An organization key cannot create personal connections"
      : "An organization key can only use its own organization";
  }
  if (p.type !== "api_key" && p.type !== "user") return "This key cannot manage connections";
  if (organizationId === null) return null;
  const role = await roleIn(db, p.userId, organizationId);
  return role ? null : "You need the member, admin or owner role in that organization";
}

/** Access to several connections in one query (ingest of a batch that names many). */
export async function connectionsAccess(
  db: Queryable,
  p: Actor,
  ids: string[],
): Promise<Map<string, Access>> {
  const rows = await connectionsVisible(db, ids, (param) => visibleConnectionsCondition(p, param));
  const out = new Map<string, Access>(ids.map((id) => [id, "absent" as Access]));
  for (const row of rows) out.set(row.id, row.visible ? "ok" : "forbidden");
  return out;
}

/** Ids of every connection the caller may see (for series reads, which filter by connection). */
export function visibleConnectionIds(db: Queryable, p: Actor): Promise<string[]> {
  return visibleIds(db, (param) => visibleConnectionsCondition(p, param));
}

/**
 * One page of the ids of the connections the caller may see, in byte order of the id, after
 * (ascending) or before (descending) `after`. Tenant isolation is the same rule as every other
 * visibility question (`visibleConnectionsCondition`), asked of PostgreSQL at the moment of the
 * read, so a connection moved out of an organization or deleted is never in a page.
 */
export function visibleConnectionIdPage(
  db: Queryable,
  p: Actor,
  q: { after?: string; order: "asc" | "desc"; limit: number },
): Promise<string[]> {
  const visible = (param: (v: unknown) => string) => visibleConnectionsCondition(p, param);
  // a user's view spans their personal connections and every organization they belong to
  if (p.type === "user" || (p.type === "api_key" && p.scope !== "organization"))
    return userVisibleIdsPage(db, p.userId, visible, q);
  return visibleIdsPage(db, visible, q);
}

/**
 * The actor as someone who manages connections (an API key or a signed-in user), or a 403: an
 * ingestion key only sends heartbeats, and jobs never create or edit connections.
 */
export function asManager(p: Actor): ApiKeyActor | UserActor {
  if (p.type === "api_key" || p.type === "user") return p;
  throw forbidden(
    p.type === "ingestion_key"
      ? "A usage-ingestion key can only send gateway heartbeats."
      : "This caller cannot manage connections",
  );
}
