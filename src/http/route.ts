import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Actor, Permission } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { actorOf } from "./auth.js";
import { type ErrorStyle, unsupportedMediaType } from "./errors.js";
import { parseOr400 } from "./validation.js";

export type Method = "GET" | "POST" | "PUT" | "DELETE";

/**
 * Who may call a route: API keys holding a permission, usage-ingestion keys only (the gateway
 * heartbeat), or anyone (health probes). The auth edge (auth.ts) enforces it before the body is read.
 */
export type RouteAuth = Permission | "usage-ingestion" | "public";

/** What a handler receives: validated inputs, the caller, and the reply (for the rare extra status). */
export interface RouteInput<P, Q, B> {
  ctx: AppContext;
  /** The authenticated caller; reading it on a public route is a 500 (a declaration error). */
  readonly actor: Actor;
  params: P;
  query: Q;
  body: B;
  reply: FastifyReply;
}

type Schemas = Partial<Record<number, z.ZodType>>;
/** A body any of the route's response schemas accepts. */
type AnyResponse<R extends Schemas> = {
  [K in keyof R]: R[K] extends z.ZodType ? z.input<R[K]> : never;
}[keyof R];

/** What the table says of a route besides its schemas and handler. */
interface RouteMeta {
  method: Method;
  /** Fastify syntax: `:id` for a path parameter. */
  path: string;
  summary: string;
  description?: string;
  /** The OpenAPI tag (one per resource file). */
  tag: string;
  auth: RouteAuth;
  /** Which of the spec's two error bodies the route answers with (connections and heartbeat: `simple`). */
  errorStyle: ErrorStyle;
  /** Largest body accepted, in bytes, when not the app's default. */
  bodyLimit?: number;
  /**
   * False when every answer is far below the compression threshold (1 KiB), so the compression
   * hooks are not run for it at all (the heartbeat: a fleet's most frequent request).
   */
  compress?: false;
}

/**
 * One endpoint, declared once: the Fastify registration (`registerRoutes`) and the OpenAPI
 * document (`openapi.ts`) both read it, so the document cannot describe a route that does not
 * exist, or a request or response the route does not accept or give.
 */
export interface RouteDef<
  P extends z.ZodType,
  Q extends z.ZodType,
  B extends z.ZodType,
  R extends Schemas,
  S extends 200 | 201,
> extends RouteMeta {
  /** Writes series rows from outside: refused with 503 while the ingest backlog is full. */
  ingest?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /**
   * Replaces the body schema's own parsing where the route reports problems its own way
   * (POST /v1/usage lists each invalid entry). The schema still describes the body.
   */
  parseBody?: (raw: unknown) => z.output<B>;
  /** The status of a normal answer. */
  status: S;
  /** The body of each non-error status the route answers: the normal one at least. */
  responses: R & Record<S, z.ZodType>;
  handler: (input: RouteInput<z.output<P>, z.output<Q>, z.output<B>>) => Promise<AnyResponse<R>>;
}

/** A declaration with its types erased, as the route table holds it. */
export interface Route extends RouteMeta {
  ingest: boolean;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  status: 200 | 201;
  responses: Schemas;
  /**
   * Validates the request (params, query, body, in that order), calls the handler, answers.
   * Invalid input throws (synchronously); Fastify answers a throw and a rejection alike.
   */
  run(ctx: AppContext, req: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

const isJson = (type: string | undefined) => type !== undefined && /^application\/json\b/i.test(type);

/** Declares a route; the types of its handler's inputs and answers come from its schemas. */
export function defineRoute<
  P extends z.ZodType = z.ZodType<undefined>,
  Q extends z.ZodType = z.ZodType<undefined>,
  B extends z.ZodType = z.ZodType<undefined>,
  R extends Schemas = Schemas,
  S extends 200 | 201 = 200 | 201,
>(def: RouteDef<P, Q, B, R, S>): Route {
  const { handler, parseBody, ...rest } = def;
  return {
    ...rest,
    ingest: def.ingest ?? false,
    // Not async: the handler's promise goes to Fastify as it is (an async wrapper would add a
    // promise and its ticks to every request); a 400 thrown here is answered as a rejection is.
    run(ctx, req, reply) {
      // Parts without a schema are not read (and not refused): as before the route table.
      const params = def.params ? parseOr400(def.params, req.params, "params") : undefined;
      const query = def.query ? parseOr400(def.query, req.query, "query") : undefined;
      // Fastify reads text/plain as a string; a JSON body is never a string unless it says so
      if (typeof req.body === "string" && (def.body || parseBody) && !isJson(req.headers["content-type"]))
        throw unsupportedMediaType();
      const body = parseBody
        ? parseBody(req.body)
        : def.body
          ? parseOr400(def.body, req.body, "body")
          : undefined;
      reply.code(def.status);
      return handler({
        ctx,
        get actor() {
          return actorOf(req);
        },
        params: params as z.output<P>,
        query: query as z.output<Q>,
        body: body as z.output<B>,
        reply,
      });
    },
  };
}

/** What the auth edge reads from a route's config (see auth.ts). */
export function authConfig(auth: RouteAuth): { permission: Permission } | { ingestion: true } | false {
  if (auth === "public") return false;
  if (auth === "usage-ingestion") return { ingestion: true };
  return { permission: auth };
}

/** Registers every route of the table on the app: one loop, the same for every endpoint. */
export function registerRoutes(app: FastifyInstance, ctx: AppContext, routes: readonly Route[]): void {
  for (const r of routes) {
    app.route({
      method: r.method,
      url: r.path,
      ...(r.bodyLimit ? { bodyLimit: r.bodyLimit } : {}),
      ...(r.compress === false ? { compress: false } : {}),
      config: { errorStyle: r.errorStyle, auth: authConfig(r.auth), ingest: r.ingest },
      handler: (req, reply) => r.run(ctx, req, reply),
    });
  }
}
