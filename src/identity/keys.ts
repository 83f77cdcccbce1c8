import { hash, randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import { API_RATE_LIMIT_PER_HOUR, INGEST_RATE_LIMIT_PER_HOUR } from "./plans.js";
import type { KeyActor } from "../core/actor.js";
import { type AppContext, perApp } from "../core/context.js";
import {
  insertKeyRow,
  type KeyKind,
  keyByHash,
  type KeyRow,
  type NewKey,
  recordKeysLastUsed,
  userRateRow,
} from "./repository.js";

export type { KeyKind };

/** What a key's holder may spend: requests per hour, counted against one scope (an account or a gateway). */
export interface RateBudget {
  scope: string;
  limitPerHour: number;
}

/** A key that authenticates: who it acts as, and the budget the edge's rate limiter counts it against. */
export interface KeyAuth {
  actor: KeyActor;
  rateLimit: RateBudget;
}

/** How long a signed-in user's budget is remembered (a plan change applies within this). */
const USER_BUDGET_TTL_MS = 60_000;
const userBudgets = perApp(() => new Map<string, { budget: RateBudget | null; until: number }>());

/**
 * The rate budget of a signed-in user (an MCP client through OAuth): the user's personal
 * account, the same scope and limit as the user's personal API keys, so a user's keys and AI
 * assistants share one hourly budget. Null when the user no longer exists.
 */
export async function userRateBudget(ctx: AppContext, userId: string): Promise<RateBudget | null> {
  const cache = userBudgets(ctx);
  const now = Date.now();
  const hit = cache.get(userId);
  if (hit && hit.until > now) return hit.budget;
  const row = await userRateRow(ctx.stores.db, userId);
  const budget = row
    ? { scope: `user:${userId}`, limitPerHour: row.rate_limit_per_hour ?? API_RATE_LIMIT_PER_HOUR[row.plan] }
    : null;
  if (cache.size > 10_000) cache.clear();
  cache.set(userId, { budget, until: now + USER_BUDGET_TTL_MS });
  return budget;
}

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

export async function insertKey(tx: Queryable, k: NewKey): Promise<string> {
  const key = generateKey(k.kind);
  await insertKeyRow(tx, { ...k, displayPrefix: key.slice(0, 12), keyHash: hashKey(key) });
  return key;
}

function toKeyAuth(r: KeyRow): KeyAuth | null {
  // An organization key stops working when its user leaves the organization.
  if (r.revoked_at || !r.still_member) return null;
  let rateLimit: RateBudget;
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
  const actor: KeyActor =
    r.kind === "usage_ingestion" && r.connection_id
      ? { type: "ingestion_key", keyId: r.id, userId: r.user_id, connectionId: r.connection_id }
      : {
          type: "api_key",
          keyId: r.id,
          userId: r.user_id,
          scope: r.kind === "organization" ? "organization" : "personal",
          organizationId: r.kind === "organization" ? r.organization_id : null,
          permissions: new Set(r.permissions),
        };
  return { actor, rateLimit };
}

interface CacheEntry {
  auth: KeyAuth | null;
  fetchedAt: number;
}

export interface KeyStoreOptions {
  /** How long a looked-up key (or a miss) is trusted before it is read again. */
  ttlMs?: number;
  maxEntries?: number;
  lastUsedFlushMs?: number;
  /** The cache's own clock, in ms (its TTL bookkeeping): the wall clock unless a test drives it. */
  now?: () => number;
  /** The business clock `last_used_at` is read from (the app's ctx.now); defaults to the cache's clock. */
  clock?: () => Date;
}

/**
 * Resolves API keys to actors. Warm keys are answered from memory: at most one database
 * read per key every `ttlMs` (3 s), so a revocation made on any node takes effect everywhere
 * within that time, and at once on the node that made it (`invalidate`). `last_used_at` is
 * written in batches, not per request.
 */
export class KeyStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<KeyAuth | null>>();
  private readonly lastUsed = new Map<string, Date>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly clock: () => Date;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: () => RelationalStore,
    private readonly log: Logger,
    opts: KeyStoreOptions = {},
  ) {
    this.ttlMs = opts.ttlMs ?? 3_000;
    this.maxEntries = opts.maxEntries ?? 100_000;
    this.now = opts.now ?? Date.now;
    this.clock = opts.clock ?? (() => new Date(this.now()));
    this.timer = setInterval(() => void this.flushLastUsed().catch(() => {}), opts.lastUsedFlushMs ?? 30_000);
    this.timer.unref();
  }

  /**
   * The key's actor and budget, or null when it is not a live key. A warm key is answered at
   * once, without a promise (the heartbeat path asks for one on every request); a cold one is
   * read from the database, one read per key however many requests wait for it.
   */
  authenticate(key: string): KeyAuth | null | Promise<KeyAuth | null> {
    if (!KEY_PATTERN.test(key)) return null;
    const hash = hashKey(key);
    const hit = this.cache.get(hash);
    if (hit && this.now() - hit.fetchedAt < this.ttlMs) return this.used(hit.auth);
    let pending = this.inflight.get(hash);
    if (!pending) {
      pending = this.load(hash).finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, pending);
    }
    return pending.then((auth) => this.used(auth));
  }

  private used(auth: KeyAuth | null): KeyAuth | null {
    if (auth) this.lastUsed.set(auth.actor.keyId, this.clock());
    return auth;
  }

  private async load(hash: string): Promise<KeyAuth | null> {
    const row = await keyByHash(this.db(), hash);
    const auth = row ? toKeyAuth(row) : null;
    if (this.cache.size >= this.maxEntries) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.delete(hash);
    this.cache.set(hash, { auth, fetchedAt: this.now() });
    return auth;
  }

  /** Forget cached keys (all, or those matching) so the next request reads them again. */
  invalidate(match?: (k: KeyActor) => boolean): void {
    if (!match) {
      this.cache.clear();
      return;
    }
    for (const [hash, e] of this.cache) if (e.auth && match(e.auth.actor)) this.cache.delete(hash);
  }

  async flushLastUsed(): Promise<void> {
    if (this.lastUsed.size === 0) return;
    const entries = [...this.lastUsed];
    this.lastUsed.clear();
    try {
      await recordKeysLastUsed(this.db(), entries);
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

/** This app's key cache (made on first use; tests may supply one with other options). */
export const keyStore = perApp(
  (ctx) => new KeyStore(() => ctx.stores.db, ctx.log, { clock: () => ctx.now() }),
);
