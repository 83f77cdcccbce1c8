import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../context.js";
import type { Permission, Principal } from "../identity/principal.js";
import { ApiError } from "./errors.js";

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
    principal?: Principal;
  }
}

export const invalidKey = (message: string) =>
  new ApiError(401, "INVALID_API_KEY", message, {}, {}, "envelope");

export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new ApiError(500, "INTERNAL_ERROR", "route is missing authentication");
  return req.principal;
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
export function registerAuth(app: FastifyInstance, ctx: AppContext, fixedPrincipal?: Principal): void {
  const refuseWhenBacklogFull = backlogGate(ctx);
  app.addHook("onRequest", async (req, reply) => {
    const auth = req.routeOptions.config?.auth;
    if (!auth) return;
    if (fixedPrincipal) {
      req.principal = fixedPrincipal;
      return;
    }
    const header = req.headers.authorization;
    if (!header) throw invalidKey("Missing API key: send the header Authorization: Bearer <API_KEY>.");
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m?.[1]) throw invalidKey("Malformed Authorization header: expected Bearer <API_KEY>.");
    const principal = await ctx.keys.authenticate(m[1]);
    if (!principal) throw invalidKey("Invalid or revoked API key.");
    req.principal = principal;
    // Before the rate limit, so a refused request does not use the caller's quota.
    if (req.routeOptions.config?.ingest) refuseWhenBacklogFull(reply);

    const decision = await ctx.limiter.take(principal.rateLimit.scope, principal.rateLimit.limitPerHour);
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
      if (principal.kind !== "usage_ingestion")
        throw new ApiError(403, "FORBIDDEN", "This endpoint only accepts a key with role usage-ingestion.");
      return;
    }
    if (principal.kind === "usage_ingestion")
      throw new ApiError(403, "FORBIDDEN", "A usage-ingestion key can only send gateway heartbeats.");
    if (!principal.permissions.has(auth.permission))
      throw new ApiError(403, "FORBIDDEN", `This API key lacks the ${auth.permission} permission.`);
  });
}
