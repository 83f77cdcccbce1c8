import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { UserActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { ServiceError } from "../core/errors.js";
import { StoreNotReadyError } from "../stores/supervisor.js";
import { jsonRpcError, RPC } from "./errors.js";
import { paramsAnswer } from "./params.js";
import { registerTools } from "./tools.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const schemaValidator = new AjvJsonSchemaValidator();

/**
 * The MCP tool server (spec: Tool server): Streamable HTTP at `/mcp` inside Vigil's Fastify
 * server, stateless (a fresh McpServer and transport per POST, JSON responses, no session), no
 * server-sent-event stream (GET, DELETE: 405) and no legacy SSE transport. Every request is
 * authenticated before its body is read; the tools then act as the signed-in user.
 *
 * Bad requests never reach a 500: a body over 1 MiB is a 413, malformed JSON a JSON-RPC parse
 * error (-32700, HTTP 400), a wrong content type a 415, a token in the query string a 400
 * (tokens go in the Authorization header), malformed `params` of the methods served a -32602
 * (params.ts; in a batch, every message is checked before any runs); the SDK answers other malformed JSON-RPC, unknown methods and unknown tools, and
 * the tools answer bad arguments with tool errors (errors.ts). Documented in docs/MCP-TOOLS.md.
 */

export const MCP_PATH = "/mcp";
/** Largest JSON-RPC request body accepted at /mcp. */
export const MCP_BODY_LIMIT = 1024 * 1024;
export const MCP_SERVER_INFO = { name: "vigil", title: "Vigil monitoring", version: "0.1.0" } as const;

/** Query parameters that would carry a credential in the URL (RFC 6750 §2.3 `access_token` and kin). */
const TOKEN_PARAMS = ["access_token", "token", "api_key"];

const INSTRUCTIONS =
  "Vigil monitors workflow automation platforms (workflow_a: self-hosted, workflow_b: hosted) and AI " +
  "gateways. Every tool is read-only and sees only the connections the signed-in user owns or reaches " +
  "through an organization. Call list_connections first to find connection ids; then " +
  "get_connection_health (availability), list_recent_executions (workflow runs and their errors), " +
  "get_gateway_usage (AI spend of a gateway connection), list_anomalies, get_alert_history and " +
  "get_slo_status (a connection's error budget and how fast it burns).";

/**
 * Signs the request in: the user the bearer token stands for, or null after the function has
 * itself answered (401 with WWW-Authenticate).
 */
export type McpAuthenticate = (req: FastifyRequest, reply: FastifyReply) => Promise<UserActor | null>;

/**
 * Counts a signed-in request against the user's hourly budget (set by the app from the REST
 * rate limiter); when it is spent, the tool server answers 429 with Retry-After.
 */
export type McpQuota = (
  user: UserActor,
  reply: FastifyReply,
) => Promise<{ allowed: true } | { allowed: false; retryAfter: number; limit: number }>;

const actors = new WeakMap<FastifyRequest, UserActor>();

function send(reply: FastifyReply, status: number, code: number, message: string) {
  return reply.code(status).type("application/json").send(jsonRpcError(code, message));
}

/** Errors before the transport took the request (authentication, body reading) as JSON-RPC errors. */
function edgeError(
  err: FastifyError | Error,
  req: FastifyRequest,
  reply: FastifyReply,
): FastifyReply | Promise<FastifyReply> {
  const fe = err as Partial<FastifyError>;
  switch (fe.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return send(
        reply,
        413,
        RPC.invalidRequest,
        `Request body too large: at most ${MCP_BODY_LIMIT} bytes per JSON-RPC request.`,
      );
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return send(
        reply,
        415,
        RPC.invalidRequest,
        "Unsupported Media Type: send JSON-RPC with Content-Type: application/json.",
      );
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return send(
        reply,
        400,
        RPC.parseError,
        "Parse error: the request body is empty; send a JSON-RPC message.",
      );
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return send(reply, 400, RPC.parseError, "Parse error: the body is not valid JSON.");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return send(reply, 400, RPC.invalidRequest, "Invalid Request: Content-Length does not match the body.");
  }
  if (err instanceof SyntaxError || (fe.statusCode === 400 && /JSON|prototype/i.test(err.message)))
    return send(reply, 400, RPC.parseError, `Parse error: ${err.message}`);
  if (
    err instanceof StoreNotReadyError ||
    (err instanceof ServiceError && (err.code === "unavailable" || err.code === "rate_limited"))
  ) {
    const status = err instanceof ServiceError && err.code === "rate_limited" ? 429 : 503;
    const retry = err instanceof ServiceError && err.retryAfter ? err.retryAfter : 5;
    reply.header("Retry-After", retry);
    return send(reply, status, RPC.serverError, err.message);
  }
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500)
    return send(reply, fe.statusCode, RPC.invalidRequest, `Invalid Request: ${err.message}`);
  req.log.error({ err }, "mcp request failed");
  return send(reply, 500, RPC.internalError, "Internal error.");
}

/**
 * Mounts the tool server at `/mcp` on `app`: POST carries JSON-RPC; GET, DELETE, PUT and PATCH
 * answer 405 with `Allow: POST` (no server-sent-event stream, no sessions to delete). On every
 * method a token in the query string is refused first, then `authenticate` runs, then `quota`,
 * before the body is read: a request without a valid token gets the 401 `authenticate` sends,
 * one over the user's hourly budget a 429.
 */
export function registerMcp(
  app: FastifyInstance,
  ctx: AppContext,
  authenticate: McpAuthenticate,
  quota?: McpQuota,
): void {
  const signIn = async (req: FastifyRequest, reply: FastifyReply) => {
    const query = req.query as Record<string, unknown> | undefined;
    const named = TOKEN_PARAMS.find((p) => query && p in query);
    if (named) {
      return send(
        reply,
        400,
        RPC.invalidRequest,
        `Invalid Request: a token in the query string (${named}) is refused; send it in the Authorization header: Authorization: Bearer <token>.`,
      );
    }
    const user = await authenticate(req, reply);
    if (!user) {
      if (!reply.sent) return send(reply, 401, RPC.serverError, "Unauthorized: sign in first.");
      return reply;
    }
    if (quota) {
      const q = await quota(user, reply);
      if (!q.allowed)
        return send(
          reply,
          429,
          RPC.serverError,
          `Rate limit of ${q.limit} requests per hour exceeded (shared with your personal API keys); retry in ${q.retryAfter} s.`,
        );
    }
    actors.set(req, user);
  };

  app.route({
    method: "POST",
    url: MCP_PATH,
    bodyLimit: MCP_BODY_LIMIT,
    errorHandler: edgeError,
    onRequest: signIn,
    handler: async (req, reply) => {
      const actor = actors.get(req);
      if (!actor) throw new Error("mcp: request reached the handler unauthenticated");
      // JSON-RPC 2.0: an empty batch is an invalid request (the transport would accept it silently)
      if (Array.isArray(req.body) && req.body.length === 0)
        return send(reply, 400, RPC.invalidRequest, "Invalid Request: an empty batch.");
      const badParams = paramsAnswer(req.body);
      if (Array.isArray(badParams) && badParams.length === 0) return reply.code(202).send();
      if (badParams) return reply.code(200).type("application/json").send(badParams);
      const server = new McpServer(MCP_SERVER_INFO, {
        capabilities: { tools: {} },
        // One validator for the process: the SDK would build a fresh Ajv for every request's
        // server otherwise (about 0.3 ms a call, npm run bench -- mcp).
        jsonSchemaValidator: schemaValidator,
        instructions: INSTRUCTIONS,
        // the tools take at most three scalar arguments
        maxToolInputElements: 64,
      });
      registerTools(server, ctx, actor, { id: req.id, log: req.log });
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      transport.onerror = (err) => req.log.debug({ err: err.message }, "mcp transport");
      // headers set before the hand-over (x-request-id, …) go out with the transport's answer
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) reply.raw.setHeader(name, value as string | number | string[]);
      reply.hijack();
      reply.raw.on("close", () => {
        void transport.close().catch(() => {});
        void server.close().catch(() => {});
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(req.raw, reply.raw, req.body);
      } catch (err) {
        req.log.error({ err }, "mcp request failed");
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { "content-type": "application/json" });
          reply.raw.end(JSON.stringify(jsonRpcError(RPC.internalError, "Internal error.")));
        } else reply.raw.end();
      }
    },
  });

  app.route({
    method: ["GET", "DELETE", "PUT", "PATCH"],
    url: MCP_PATH,
    errorHandler: edgeError,
    onRequest: signIn,
    handler: async (_req, reply) =>
      reply
        .code(405)
        .header("Allow", "POST")
        .type("application/json")
        .send(
          jsonRpcError(
            RPC.serverError,
            "Method Not Allowed: Vigil's tool server takes JSON-RPC over POST only (stateless Streamable HTTP; no server-sent-event stream, no sessions).",
          ),
        ),
  });
}
