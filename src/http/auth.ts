import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../core/context.js";
import { type Actor, hasPermission, type Permission } from "../core/actor.js";
import { ApiError } from "./errors.js";
import { type KeyAuth, keyStore, userRateBudget } from "../identity/keys.js";
import type { RateDecision, RateLimiter } from "../ratelimit/limiter.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * What the route requires of the API key: a permission, or (for the heartbeat endpoint)
     * a usage-ingestion key. `false` for public routes.
     */
    auth?: { permission: Permission } | { ingestion: true } | false;
    /** The route writes series rows from outside (heartbeats, usage): refused while the backlog is full. */
    ingest?: boolean;
  }
  interface FastifyRequest {
    /** Who is calling, set by the authentication hook on every route that declares `auth`. */
    actor?: Actor;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const WHITESPACE = /\s/;

/** The key of an `Authorization: Bearer <key>` header; a 401 for any other form. */
function bearerToken(header: string): string {
  // the usual form, exactly "Bearer " and the key, without a match array
  if (header.startsWith("Bearer ") && header.length > 7 && !WHITESPACE.test(header.slice(7)))
    return header.slice(7);
  const m = BEARER.exec(header);
  if (!m?.[1]) throw invalidKey("Malformed Authorization header: expected Bearer <API_KEY>.");
  return m[1];
}

export const invalidKey = (message: string) =>
  new ApiError(401, "INVALID_API_KEY", message, {}, {}, "envelope");

export function actorOf(req: FastifyRequest): Actor {
  if (!req.actor) throw new ApiError(500, "INTERNAL_ERROR", "route is missing authentication");
  return req.actor;
}

function setRateHeaders(reply: FastifyReply, d: { limit: number; remaining: number; reset: number }) {
  reply.header("X-RateLimit-Limit", d.limit);
  reply.header("X-RateLimit-Remaining", d.remaining);
  reply.header("X-RateLimit-Reset", d.reset);
}

/**
 * Sheds ingest while the series store is behind: past `INGEST_MAX_BACKLOG_ROWS` rows waiting, the
 * request gets a 503 before its body is read, nothing is stored, and the caller is told to retry
 * in a second, instead of every request queueing (and holding memory) behind a stalled store.
 * An overload logs one warning a second, not one per request.
 */
function backlogGate(ctx: AppContext): (reply: FastifyReply) => void {
  let warnedAt = 0;
  return (reply) => {
    if (!ctx.stores.isReady) return; // the route answers 503 for that itself
    const waiting = ctx.stores.series.backlog();
    const limit = ctx.config.ingest.maxBacklogRows;
    if (waiting < limit) return;
    const now = Date.now();
    if (now - warnedAt >= 1000) {
      warnedAt = now;
      ctx.log.warn({ waiting, limit }, "ingest backlog full: refusing heartbeats and usage with 503");
    }
    reply.header("Retry-After", 1);
    throw new ApiError(
      503,
      "SERVICE_UNAVAILABLE",
      `Vigil is behind on writes (${waiting} rows waiting for the series store, limit ${limit}); nothing was stored. Retry in 1 s.`,
      { backlog_rows: waiting, limit, retry_after: 1 },
    );
  };
}

/**
 * Authentication, the ingest backlog gate (routes with `config.ingest`), rate limiting and
 * permission checks for every route that declares `config.auth`, in that order, before the body
 * is parsed: a request without a valid key gets its 401 even when its body is malformed, and a
 * request refused for the backlog uses no quota. `fixedPrincipal` (benchmarks only) skips them all.
 */
export function registerAuth(
  app: FastifyInstance,
  ctx: AppContext,
  limiter: RateLimiter,
  fixedActor?: Actor,
): void {
  const refuseWhenBacklogFull = backlogGate(ctx);
  const keys = keyStore(ctx);

  /** The key's caller admitted or refused: the backlog gate, then the rate limit. */
  const admitKey = (
    req: FastifyRequest,
    reply: FastifyReply,
    auth: { permission: Permission } | { ingestion: true },
    key: KeyAuth | null,
  ): void | Promise<void> => {
    if (!key) throw invalidKey("Invalid or revoked API key.");
    req.actor = key.actor;
    // Before the rate limit, so a refused request does not use the caller's quota.
    if (req.routeOptions.config?.ingest) refuseWhenBacklogFull(reply);
    const decision = limiter.take(key.rateLimit.scope, key.rateLimit.limitPerHour);
    if (decision instanceof Promise) return decision.then((d) => permit(reply, auth, key.actor, d));
    permit(reply, auth, key.actor, decision);
  };

  const permit = (
    reply: FastifyReply,
    auth: { permission: Permission } | { ingestion: true },
    actor: Actor,
    decision: RateDecision,
  ): void => {
    setRateHeaders(reply, decision);
    if (!decision.allowed) {
      const retryAfter = Math.max(1, Math.ceil(decision.reset - ctx.now().getTime() / 1000));
      reply.header("Retry-After", retryAfter);
      throw new ApiError(
        429,
        "RATE_LIMITED",
        `Rate limit of ${decision.limit} requests per hour exceeded; retry in ${retryAfter} s.`,
        { limit: decision.limit, reset: decision.reset, retry_after: retryAfter },
        {},
        "envelope",
      );
    }
    if ("ingestion" in auth) {
      if (actor.type !== "ingestion_key")
        throw new ApiError(403, "FORBIDDEN", "This endpoint only accepts a key with role usage-ingestion.");
      return;
    }
    if (actor.type === "ingestion_key")
      throw new ApiError(403, "FORBIDDEN", "A usage-ingestion key can only send gateway heartbeats.");
    if (!hasPermission(actor, auth.permission))
      throw new ApiError(403, "FORBIDDEN", `This API key lacks the ${auth.permission} permission.`);
  };

  const authorize = (req: FastifyRequest, reply: FastifyReply): void | Promise<void> => {
    const auth = req.routeOptions.config?.auth;
    if (!auth) return;
    if (fixedActor) {
      req.actor = fixedActor;
      return;
    }
    const header = req.headers.authorization;
    if (!header) throw invalidKey("Missing API key: send the header Authorization: Bearer <API_KEY>.");
    const key = keys.authenticate(bearerToken(header));
    if (key instanceof Promise) return key.then((k) => admitKey(req, reply, auth, k));
    return admitKey(req, reply, auth, key);
  };

  // A callback hook, answered synchronously when the key and its rate window are warm in memory
  // (nearly every request): no promise per request on the path every heartbeat takes.
  app.addHook("onRequest", (req, reply, done) => {
    let pending: void | Promise<void>;
    try {
      pending = authorize(req, reply);
    } catch (err) {
      return done(err as Error);
    }
    if (pending instanceof Promise)
      pending.then(
        () => done(),
        // never done() without an error: that would let the request through
        (err: unknown) =>
          done(err instanceof Error ? err : new Error(`authentication failed: ${String(err)}`)),
      );
    else done();
  });
}

/**
 * The rate limit of a signed-in user's request (the MCP tool server): counted against the user's
 * personal account, the scope and limit of the user's personal API keys, with the same
 * X-RateLimit-* headers. Answers whether it may go on, and when not, the seconds until the
 * window resets and the limit, for the door to answer 429 in its own body.
 */
export async function takeUserQuota(
  ctx: AppContext,
  limiter: RateLimiter,
  userId: string,
  reply: FastifyReply,
): Promise<{ allowed: true } | { allowed: false; retryAfter: number; limit: number }> {
  const budget = await userRateBudget(ctx, userId);
  if (!budget) return { allowed: true }; // the token check refuses a deleted user itself
  const decision = await limiter.take(budget.scope, budget.limitPerHour);
  setRateHeaders(reply, decision);
  if (decision.allowed) return { allowed: true };
  const retryAfter = Math.max(1, Math.ceil(decision.reset - ctx.now().getTime() / 1000));
  reply.header("Retry-After", retryAfter);
  return { allowed: false, retryAfter, limit: decision.limit };
}
