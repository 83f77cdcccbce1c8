import { randomUUID } from "node:crypto";
import type pino from "pino";
import fastifyCompress from "@fastify/compress";
import fastifyCors from "@fastify/cors";
import FindMyWay, { type HTTPMethod } from "find-my-way";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from "fastify";
import {
  ApiError,
  type ErrorStyle,
  fromServiceError,
  renderError,
  ServiceError,
  unavailable,
  unsupportedMediaType,
} from "./http/errors.js";
import { registerAuth, takeUserQuota } from "./http/auth.js";
import { clientErrors, frameworkErrors, registerInputRules } from "./http/edge.js";
import { LazyChildLogger } from "./lib/logger.js";
import { registerDocs } from "./http/docs.js";
import { registerMetrics } from "./http/metrics.js";
import { openApiDocument } from "./http/openapi.js";
import { registerRoutes } from "./http/route.js";
import { registerMcp } from "./mcp/server.js";
import { registerStatusPages, rewriteStatusHost } from "./http/status-pages.js";
import { registerOtlp } from "./http/otlp.js";
import { browserNotFound, registerDashboard } from "./dashboard/index.js";
import { mcpAuthenticate, registerOAuth } from "./oauth/routes.js";
import { routes, tags } from "./http/routes/index.js";
import type { Actor } from "./core/actor.js";
import type { AppContext } from "./core/context.js";
import { RateLimiter, type RateLimiterOptions } from "./ratelimit/limiter.js";
import { SeriesUnavailableError, SeriesValidationError } from "./stores/series/types.js";
import { StoreNotReadyError } from "./stores/supervisor.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** Which of the spec's error bodies this route answers with; default `envelope`. */
    errorStyle?: ErrorStyle;
  }
}

export interface AppOptions {
  /** Largest request body accepted by default, in bytes. */
  bodyLimit?: number;
  /** Benchmarks only: every request acts as this actor, with no key lookup and no rate limit. */
  fixedActor?: Actor;
  /** Rate limiter tuning (tests shorten its sync interval). */
  limiter?: RateLimiterOptions;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;
const METHODS: HTTPMethod[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** Maps any thrown value to the ApiError the client sees. Internal messages never leave for a 5xx. */
export function toApiError(err: unknown, bodyLimit?: number): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ServiceError) return fromServiceError(err);
  if (err instanceof StoreNotReadyError) return unavailable(err.message, { store: err.store });
  if (err instanceof SeriesUnavailableError)
    return unavailable("The series store is unavailable; nothing was stored. Retry shortly.", {
      store: err.store,
    });
  if (err instanceof SeriesValidationError)
    return new ApiError(400, "VALIDATION_ERROR", err.message, { field: err.field });
  const fe = err as Partial<FastifyError>;
  switch (fe.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError(
        413,
        "PAYLOAD_TOO_LARGE",
        bodyLimit ? `Payload too large: at most ${bodyLimit} bytes.` : "Payload too large.",
      );
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return unsupportedMediaType();
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ApiError(400, "VALIDATION_ERROR", "body: the request body is empty; send a JSON document.");
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return new ApiError(400, "VALIDATION_ERROR", "body: malformed JSON; send a valid JSON document.");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ApiError(400, "VALIDATION_ERROR", "Content-Length does not match the body.");
  }
  if (fe.statusCode === 400 && err instanceof SyntaxError) {
    return new ApiError(400, "VALIDATION_ERROR", `body: malformed JSON (${err.message})`);
  }
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ApiError(fe.statusCode, "BAD_REQUEST", fe.message ?? "Bad request.");
  }
  return new ApiError(500, "INTERNAL_ERROR", "Internal server error.");
}

/**
 * The Fastify application, separate from the process (server.ts) so tests can build it
 * around real stores and call `app.inject` without a socket.
 */
export async function buildApp(ctx: AppContext, opts: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    childLoggerFactory: (logger, bindings, opts) =>
      new LazyChildLogger(logger as pino.Logger, bindings, opts) as unknown as FastifyBaseLogger,
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    forceCloseConnections: "idle",
    ajv: { customOptions: { coerceTypes: false } },
    // a URL the router cannot read answers in the API's error body (edge.ts)
    frameworkErrors,
    // what Node's HTTP parser refuses (431 and the like) answers in the envelope too (edge.ts)
    clientErrorHandler: clientErrors,
    // a status page's custom domain reads its public paths (http/status-pages.ts); one map lookup
    rewriteUrl: (req) => rewriteStatusHost(ctx, req),
  });

  // Callback-style hooks on every request (here and in edge.ts): an async hook costs a promise
  // and a microtask per request, which a fleet's heartbeats pay on every call.
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("x-request-id", req.id);
    done();
  });
  // requests by route template, method and status, and GET /metrics (METRICS_TOKEN)
  registerMetrics(app, ctx);
  // JSON depth, prototype keys and unstorable text, checked once for every route
  registerInputRules(app);
  // Browser callers from CORS_ORIGINS only (off by default). Bearer keys, never cookies, so a
  // page elsewhere cannot ride a signed-in session.
  if (ctx.config.corsOrigins)
    await app.register(fastifyCors, {
      origin: ctx.config.corsOrigins === "*" ? "*" : ctx.config.corsOrigins,
      credentials: false,
      methods: ["GET", "HEAD", "POST", "PUT", "DELETE"],
      allowedHeaders: ["Authorization", "Content-Type", "X-Request-Id", "Mcp-Protocol-Version"],
      exposedHeaders: [
        "X-Request-Id",
        "Retry-After",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "WWW-Authenticate",
      ],
      maxAge: 600,
    });
  // gzip or deflate for answers over 1 KiB when the client accepts it (pages of rows compress ~10x)
  await app.register(fastifyCompress, { threshold: 1024, encodings: ["gzip", "deflate"] });

  app.setErrorHandler((err, req, reply) => {
    const apiErr = toApiError(err, req.routeOptions.bodyLimit);
    if (apiErr.statusCode === 503 && !reply.hasHeader("retry-after"))
      reply.header("Retry-After", err instanceof ServiceError && err.retryAfter ? err.retryAfter : 5);
    if (apiErr.statusCode >= 500 && apiErr.statusCode !== 503) req.log.error({ err }, "request failed");
    // A 503 the app chose (ingest backlog full) logs itself, at most once a second.
    else if (apiErr.statusCode === 503 && !(err instanceof ApiError) && !(err instanceof ServiceError))
      req.log.warn({ err: (err as Error).message }, "store unavailable");
    const style = req.routeOptions.config?.errorStyle ?? "envelope";
    return reply.code(apiErr.statusCode).send(renderError(style, apiErr));
  });

  // Every route's path and methods, so a known path asked with another method is a 405 naming
  // the methods it has (RFC 9110 §15.5.6), not a 404.
  const known = FindMyWay({ ignoreTrailingSlash: false });
  app.addHook("onRoute", (r) => {
    if (r.url.includes("*")) return; // catch-alls (CORS preflight) say nothing about a path
    for (const m of Array.isArray(r.method) ? r.method : [r.method])
      if (!known.hasRoute(m as HTTPMethod, r.url)) known.on(m as HTTPMethod, r.url, () => {});
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "/";
    const allow = METHODS.filter((m) => known.find(m, path) !== null);
    if (allow.length > 0) {
      const err = new ApiError(
        405,
        "METHOD_NOT_ALLOWED",
        `${req.method} is not allowed on ${path}; use ${allow.join(", ")}.`,
        { allow },
      );
      return reply.code(405).header("Allow", allow.join(", ")).send(renderError("envelope", err));
    }
    if (browserNotFound(req, reply)) return reply;
    const err = new ApiError(404, "NOT_FOUND", `No route ${req.method} ${path}.`);
    return reply.code(404).send(renderError("envelope", err));
  });

  // The rate limit belongs to the edge: the app owns its limiter and writes its counts on close.
  const limiter = new RateLimiter(() => ctx.stores.db, ctx.log, {
    now: () => ctx.now().getTime(),
    ...opts.limiter,
  });
  app.addHook("onClose", () => limiter.close().catch(() => {}));
  registerAuth(app, ctx, limiter, opts.fixedActor);
  // One table drives the routes, their document and the interactive reference at /docs.
  registerRoutes(app, ctx, routes);
  // OTLP/HTTP for gateways that speak OpenTelemetry: its own body parsers and error bodies
  await registerOtlp(app, ctx, toApiError);
  const openapi = openApiDocument(routes, tags, ctx.config.publicUrl, "0.1.0");
  app.get("/v1/openapi.json", async () => openapi);
  await registerDocs(app, openapi);
  // The OAuth 2.1 authorization server and sign-in pages (the MCP tool server's door in).
  await registerOAuth(app, ctx);
  // Public status pages at /status/{slug} and on their custom domains: no key, no session, cached.
  await registerStatusPages(app, ctx);
  // The web dashboard at /, on the sign-in session of the pages above.
  await registerDashboard(app, ctx);
  // The read-only MCP tool server at /mcp, for users signed in with OAuth.
  // Its requests count against the user's hourly budget, shared with the user's personal keys.
  registerMcp(app, ctx, mcpAuthenticate(ctx), (user, reply) =>
    takeUserQuota(ctx, limiter, user.userId, reply),
  );
  return app;
}
