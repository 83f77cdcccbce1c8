/**
 * Who is calling. Every service verb and query takes one Actor; which connections it may see is
 * decided by one function (`identity/visibility.ts`) for every kind. Transports establish the
 * actor (REST from an API key, MCP from an OAuth token, the dashboard from its session cookie,
 * jobs as the system) and never decide visibility themselves.
 */
export const PERMISSIONS = [
  "connections:read",
  "connections:write",
  "connections:delete",
  "usage:read",
  "usage:write",
  "analytics:read",
] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** Read-only permissions: what an OAuth token for the MCP tool server carries. */
export const READ_PERMISSIONS: readonly Permission[] = ["connections:read", "usage:read", "analytics:read"];

export const ROLES = ["member", "admin", "owner"] as const;
export type Role = (typeof ROLES)[number];

/**
 * A REST API key. `personal`: the user's own connections plus every organization's the user
 * belongs to; `organization`: that one organization's.
 */
export interface ApiKeyActor {
  readonly type: "api_key";
  readonly keyId: string;
  readonly userId: string;
  readonly scope: "personal" | "organization";
  /** Set for an organization key; null for a personal one. */
  readonly organizationId: string | null;
  readonly permissions: ReadonlySet<Permission>;
}

/** A key with role usage-ingestion: bound to one gateway connection, accepted only by heartbeat ingest. */
export interface IngestionKeyActor {
  readonly type: "ingestion_key";
  readonly keyId: string;
  readonly userId: string;
  readonly connectionId: string;
}

/** A signed-in person: through an OAuth access token (MCP) or a dashboard session. Sees what the user sees. */
export interface UserActor {
  readonly type: "user";
  readonly userId: string;
  readonly via: "oauth" | "session";
  readonly permissions: ReadonlySet<Permission>;
  /**
   * The organization whose account settings (notification channels, routing rules) a dashboard
   * page acts on, as an organization key would; absent: the user's personal account. It widens
   * nothing: each verb checks the user's role in it.
   */
  readonly actingFor?: string;
}

/** Vigil itself (probes, detectors, retention, delivery): sees every connection. */
export interface SystemActor {
  readonly type: "system";
  /** What is acting, for logs and timelines (`probe`, `heartbeat-monitor`, …). */
  readonly job: string;
}

export type Actor = ApiKeyActor | IngestionKeyActor | UserActor | SystemActor;
export type KeyActor = ApiKeyActor | IngestionKeyActor;

export const systemActor = (job: string): SystemActor => ({ type: "system", job });

/** Whether the actor holds a permission. An ingestion key holds none; the system holds all. */
export function hasPermission(actor: Actor, permission: Permission): boolean {
  switch (actor.type) {
    case "api_key":
    case "user":
      return actor.permissions.has(permission);
    case "ingestion_key":
      return false;
    case "system":
      return true;
  }
}

/** The user on whose behalf the actor acts (null for the system). */
export const actingUser = (actor: Actor): string | null => (actor.type === "system" ? null : actor.userId);

export function parsePermissions(list: string): Permission[] {
  if (list.trim() === "all") return [...PERMISSIONS];
  const out = list
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (out.length === 0) throw new Error("permissions: name at least one, or `all`");
  for (const p of out) {
    if (!(PERMISSIONS as readonly string[]).includes(p))
      throw new Error(`permissions: unknown permission "${p}"; use ${PERMISSIONS.join(", ")} or all`);
  }
  return [...new Set(out)] as Permission[];
}
