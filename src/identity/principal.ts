export const PERMISSIONS = [
  "connections:read",
  "connections:write",
  "connections:delete",
  "usage:read",
  "usage:write",
  "analytics:read",
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const ROLES = ["member", "admin", "owner"] as const;
export type Role = (typeof ROLES)[number];

/** personal: the user's own plus their organizations'; organization: one organization; usage_ingestion: one gateway. */
export type KeyKind = "personal" | "organization" | "usage_ingestion";

/** Who is calling, as established from the API key. Everything that decides access takes one. */
export interface Principal {
  keyId: string;
  userId: string;
  kind: KeyKind;
  organizationId: string | null;
  connectionId: string | null;
  permissions: ReadonlySet<Permission>;
  /** Requests are counted against this scope's hourly budget. */
  rateLimit: { scope: string; limitPerHour: number };
}

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
