import { hash, randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import { API_RATE_LIMIT_PER_HOUR, INGEST_RATE_LIMIT_PER_HOUR, type Plan } from "./plans.js";
import type { KeyKind, Permission, Principal } from "./principal.js";

/**
 * API keys: `vgl_` (REST) or `vgi_` (heartbeat ingestion) followed by 192 random bits.
 * Only a SHA-256 of the key is stored: a key has far more entropy than a password, so a fast
 * hash is enough and keeps the lookup cheap. The plaintext is returned once, at creation.
 */
const KEY_PATTERN = /^vg[li]_[A-Za-z0-9_-]{32}$/;

export function generateKey(kind: KeyKind): string {
  return `${kind === "usage_ingestion" ? "vgi" : "vgl"}_${randomBytes(24).toString("base64url")}`;
}

export const hashKey = (key: string) => hash("sha256", key, "hex");

export async function insertKey(
  tx: Queryable,
  k: {
    id: string;
    userId: string;
    kind: KeyKind;
    organizationId?: string | null;
    connectionId?: string | null;
    name?: string | null;
    permissions: Permission[];
  },
): Promise<string> {
  const key = generateKey(k.kind);
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
      key.slice(0, 12),
      hashKey(key),
      k.permissions,
    ],
  );
  return key;
}

interface KeyRow {
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
  still_member: boolean;
}

const LOOKUP = `
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

function toPrincipal(r: KeyRow): Principal | null {
  // An organization key stops working when its user leaves the organization.
  if (r.revoked_at || !r.still_member) return null;
  let rateLimit: Principal["rateLimit"];
  if (r.kind === "usage_ingestion") {
    rateLimit = {
      scope: `connection:${r.connection_id}`,
      limitPerHour: INGEST_RATE_LIMIT_PER_HOUR[r.user_plan],
    };
  } else if (r.kind === "organization" && r.org_plan) {
    rateLimit = {
      scope: `organization:${r.organization_id}`,
      limitPerHour: r.org_limit ?? API_RATE_LIMIT_PER_HOUR[r.org_plan],
    };
  } else {
    rateLimit = {
      scope: `user:${r.user_id}`,
      limitPerHour: r.user_limit ?? API_RATE_LIMIT_PER_HOUR[r.user_plan],
    };
  }
  return {
    keyId: r.id,
    userId: r.user_id,
    kind: r.kind,
    organizationId: r.organization_id,
    connectionId: r.connection_id,
    permissions: new Set(r.permissions),
    rateLimit,
  };
}

interface CacheEntry {
  principal: Principal | null;
  fetchedAt: number;
}

export interface KeyStoreOptions {
  /** How long a looked-up key (or a miss) is trusted before it is read again. */
  ttlMs?: number;
  maxEntries?: number;
  lastUsedFlushMs?: number;
  now?: () => number;
}

/**
 * Resolves API keys to principals. Warm keys are answered from memory: at most one database
 * read per key every `ttlMs` (3 s), so a revocation made on any node takes effect everywhere
 * within that time, and at once on the node that made it (`invalidate`). `last_used_at` is
 * written in batches, not per request.
 */
export class KeyStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<Principal | null>>();
  private readonly lastUsed = new Map<string, Date>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: () => RelationalStore,
    private readonly log: Logger,
    opts: KeyStoreOptions = {},
  ) {
    this.ttlMs = opts.ttlMs ?? 3_000;
    this.maxEntries = opts.maxEntries ?? 100_000;
    this.now = opts.now ?? Date.now;
    this.timer = setInterval(() => void this.flushLastUsed().catch(() => {}), opts.lastUsedFlushMs ?? 30_000);
    this.timer.unref();
  }

  async authenticate(key: string): Promise<Principal | null> {
    if (!KEY_PATTERN.test(key)) return null;
    const hash = hashKey(key);
    const hit = this.cache.get(hash);
    let principal: Principal | null;
    if (hit && this.now() - hit.fetchedAt < this.ttlMs) {
      principal = hit.principal;
    } else {
      let pending = this.inflight.get(hash);
      if (!pending) {
        pending = this.load(hash).finally(() => this.inflight.delete(hash));
        this.inflight.set(hash, pending);
      }
      principal = await pending;
    }
    if (principal) this.lastUsed.set(principal.keyId, new Date(this.now()));
    return principal;
  }

  private async load(hash: string): Promise<Principal | null> {
    const res = await this.db().query<KeyRow & Record<string, unknown>>(LOOKUP, [hash]);
    const row = res.rows[0];
    const principal = row ? toPrincipal(row) : null;
    if (this.cache.size >= this.maxEntries) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.delete(hash);
    this.cache.set(hash, { principal, fetchedAt: this.now() });
    return principal;
  }

  /** Forget cached keys (all, or those matching) so the next request reads them again. */
  invalidate(match?: (p: Principal) => boolean): void {
    if (!match) {
      this.cache.clear();
      return;
    }
    for (const [hash, e] of this.cache) if (e.principal && match(e.principal)) this.cache.delete(hash);
  }

  async flushLastUsed(): Promise<void> {
    if (this.lastUsed.size === 0) return;
    const entries = [...this.lastUsed];
    this.lastUsed.clear();
    try {
      await this.db().query(
        `UPDATE api_keys SET last_used_at = v.t
           FROM (SELECT unnest($1::text[]) AS id, unnest($2::timestamptz[]) AS t) v
          WHERE api_keys.id = v.id AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < v.t)`,
        [entries.map(([id]) => id), entries.map(([, t]) => t.toISOString())],
      );
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "could not record key last_used_at; will retry");
      for (const [id, t] of entries) if (!this.lastUsed.has(id)) this.lastUsed.set(id, t);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flushLastUsed();
  }
}
