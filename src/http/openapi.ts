import { z } from "zod";
import { envelopeError, simpleError } from "./responses/errors.js";
import type { Route } from "./route.js";

/**
 * The REST API's OpenAPI 3.1 document, generated from the route table: paths, permissions and
 * parameters from the schemas that validate each request, and every answer's body from the
 * route's response schemas (and the error body of its style), so the document cannot drift from
 * what the server accepts and sends. test/api/responses.test.ts validates real answers against it.
 */

type JsonSchema = { properties?: Record<string, unknown>; required?: string[] } & Record<string, unknown>;

/** A zod schema as JSON Schema (2020-12, which OpenAPI 3.1 uses), without the `$schema` line. */
function jsonSchema(s: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(s, { io, unrepresentable: "any" }) as JsonSchema;
  return rest;
}

function parameters(schema: z.ZodType | undefined, where: "query" | "path") {
  if (!schema) return [];
  const js = jsonSchema(schema, "input");
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === "path" || (js.required ?? []).includes(name),
    schema: s,
  }));
}

const json = (schema: unknown) => ({ "application/json": { schema } });

/** Does the route name a connection (path id, or connection_id in its query or body)? Then 404 applies. */
function namesConnection(r: Route): boolean {
  if (r.params) return true;
  return [r.query, r.body].some(
    (s) => s !== undefined && JSON.stringify(jsonSchema(s, "input")).includes('"connection_id"'),
  );
}

/** The error answers a route can give, each with the body it really sends. */
function errorResponses(r: Route, errorBody: unknown, envelope: unknown) {
  const out: Record<string, { description: string; content: ReturnType<typeof json> }> = {};
  const add = (status: number, description: string, body = errorBody) =>
    (out[status] = { description, content: json(body) });
  // every route: the input rules of the edge (edge.ts) meet every request, parameters or not
  add(
    400,
    r.params || r.query || r.body
      ? "A field or parameter is invalid; the message names it (an invalid cursor: INVALID_CURSOR)"
      : "The request breaks an input rule every route keeps (text that cannot be stored, a malformed URL or body); the message names it",
  );
  if (r.auth !== "public") {
    // authentication and rate-limit failures always use the envelope, whatever the route's style
    add(401, "Missing, unknown or revoked API key (INVALID_API_KEY)", envelope);
    add(
      403,
      r.auth === "usage-ingestion"
        ? "The key's role is not usage-ingestion"
        : `The key lacks ${r.auth}, is a usage-ingestion key, or has no access to the connection or organization`,
    );
  }
  if (namesConnection(r)) add(404, "The connection does not exist");
  // a body is read for every method but GET, whether the route takes one or not
  if (r.body || r.method !== "GET") add(413, "The body is larger than the route accepts (PAYLOAD_TOO_LARGE)");
  if (r.auth !== "public") add(429, "Rate limit exceeded; see Retry-After and X-RateLimit-Reset", envelope);
  if (r.auth !== "public")
    add(
      503,
      r.ingest
        ? "A store is unavailable, or the ingest backlog is full; nothing was stored; see Retry-After"
        : "A store is unavailable; see Retry-After",
    );
  if (r.auth !== "public") add(500, "Internal server error (INTERNAL_ERROR); the message tells nothing more");
  return out;
}

const rateLimitHeaders = {
  "X-RateLimit-Limit": { description: "Requests allowed per hour", schema: { type: "integer" } },
  "X-RateLimit-Remaining": { description: "Requests left in this hour", schema: { type: "integer" } },
  "X-RateLimit-Reset": {
    description: "End of the current window, Unix seconds",
    schema: { type: "integer" },
  },
};

export function openApiDocument(routes: readonly Route[], publicUrl: string, version: string) {
  const envelope = jsonSchema(envelopeError, "output");
  const simple = jsonSchema(simpleError, "output");
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, "{$1}");
    const answers: Record<string, unknown> = {};
    for (const [status, schema] of Object.entries(r.responses)) {
      if (!schema) continue;
      answers[status] = {
        description: Number(status) === r.status ? "OK" : `Answered with ${status}`,
        ...(r.auth === "public" ? {} : { headers: rateLimitHeaders }),
        content: json(jsonSchema(schema, "output")),
      };
    }
    (paths[path] ??= {})[r.method.toLowerCase()] = {
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
      operationId: `${r.method.toLowerCase()}${path.replace(/[{}]/g, "").replace(/[/_-](\w)/g, (_, c: string) => c.toUpperCase())}`,
      ...(r.auth === "public" ? { security: [] } : { "x-permission": r.auth, security: [{ apiKey: [] }] }),
      parameters: [...parameters(r.params, "path"), ...parameters(r.query, "query")],
      ...(r.body ? { requestBody: { required: true, content: json(jsonSchema(r.body, "input")) } } : {}),
      responses: {
        ...answers,
        ...errorResponses(r, r.errorStyle === "simple" ? simple : envelope, envelope),
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Vigil",
      version,
      description: "Monitoring of workflow automation platforms and AI gateways.",
    },
    servers: [{ url: publicUrl }],
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer <API_KEY>" },
      },
    },
    paths,
  };
}
