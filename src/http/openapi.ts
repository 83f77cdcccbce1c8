import { z } from "zod";
import { MAX_URL_LENGTH } from "./edge.js";
import type { ErrorStyle } from "./errors.js";
import { envelopeError, simpleError } from "./responses/errors.js";
import type { Route } from "./route.js";

/**
 * The REST API's OpenAPI 3.1 document, generated from the route table: paths, permissions and
 * parameters from the schemas that validate each request, and every answer's body from the
 * route's response schemas (and the error body of its style), so the document cannot drift from
 * what the server accepts and sends. test/api/responses.test.ts validates real answers against
 * it; test/api/clients.test.ts hands it to swagger-parser, Redocly and openapi-typescript.
 */

type JsonSchema = { properties?: Record<string, unknown>; required?: string[] } & Record<string, unknown>;
type Io = "input" | "output";

/** A zod schema as JSON Schema (2020-12, which OpenAPI 3.1 uses), without the `$schema` line. */
function jsonSchema(s: z.ZodType, io: Io): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(s, { io, unrepresentable: "any" }) as JsonSchema;
  return rest;
}

const COMPONENT = "#/components/schemas/";
const LOCAL = "#/$defs/";

/** Every `$ref` of a JSON value rewritten by `to`. */
function mapRefs(v: unknown, to: (ref: string) => string): unknown {
  if (Array.isArray(v)) return v.map((x) => mapRefs(x, to));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    out[k] = k === "$ref" && typeof x === "string" ? to(x) : mapRefs(x, to);
  return out;
}

/**
 * The document's `components/schemas`, filled as the operations are rendered. zod writes a
 * schema that is recursive or carries an id (`.meta({ id })`) into the converted schema's own
 * `$defs`, with `$ref`s that JSON Schema resolves against that schema; in an OpenAPI document a
 * `#/...` reference resolves against the document's root, where those `$defs` are not. So every
 * definition moves to `components/schemas` under its id and every reference is rewritten to
 * point there: one named type per shared schema for generated clients, and references every
 * OpenAPI tool resolves.
 */
export class Components {
  readonly schemas: Record<string, JsonSchema> = {};

  /** The zod schema as JSON Schema, its references all pointing into `components/schemas`. */
  schema(s: z.ZodType, io: Io): JsonSchema {
    const { $defs = {}, ...root } = jsonSchema(s, io) as JsonSchema & { $defs?: Record<string, JsonSchema> };
    const names = new Map(Object.entries($defs).map(([def, body]) => [def, this.nameFor(def, body, io)]));
    const to = (ref: string) => {
      if (!ref.startsWith(LOCAL))
        throw new Error(
          `openapi: a schema refers to ${ref}, which means nothing in the document; give the recursive schema .meta({ id: "Name" })`,
        );
      const name = names.get(ref.slice(LOCAL.length));
      if (!name) throw new Error(`openapi: ${ref} names no definition`);
      return COMPONENT + name;
    };
    for (const [def, body] of Object.entries($defs))
      this.schemas[to(LOCAL + def).slice(COMPONENT.length)] = mapRefs(body, to) as JsonSchema;
    return mapRefs(root, to) as JsonSchema;
  }

  /** Registers a schema under a name of the caller's choosing and answers a reference to it. */
  named(name: string, s: z.ZodType, io: Io): { $ref: string } {
    const body = this.schema(s, io);
    if (this.schemas[name] && JSON.stringify(this.schemas[name]) !== JSON.stringify(body))
      throw new Error(`openapi: two different schemas are named ${name}`);
    this.schemas[name] = body;
    return { $ref: COMPONENT + name };
  }

  /**
   * The component name of one of zod's definitions: its id. An anonymous one (zod's `__schemaN`:
   * a recursive schema without an id) is refused, since its name would change with the order of
   * the routes. The same id rendered differently for requests and answers (a default, a
   * transform) is named `<id>Input` in its request form.
   */
  private nameFor(def: string, body: JsonSchema, io: Io): string {
    if (def.startsWith("__schema"))
      throw new Error(
        `openapi: a recursive schema has no id (${JSON.stringify(body).slice(0, 120)}…); give it .meta({ id: "Name" })`,
      );
    const text = JSON.stringify(mapRefs(body, (r) => r.replace(LOCAL, COMPONENT)));
    const fits = (name: string) =>
      this.schemas[name] === undefined || JSON.stringify(this.schemas[name]) === text;
    if (fits(def)) return def;
    if (io === "input" && fits(`${def}Input`)) return `${def}Input`;
    throw new Error(`openapi: two different schemas carry the id ${def}`);
  }
}

/** A query parameter the schema reads as a whole number from its text (`intParam`s). */
const WHOLE_NUMBER_TEXT = "^-?\\d+$";

function parameters(components: Components, schema: z.ZodType | undefined, where: "query" | "path") {
  if (!schema) return [];
  const js = components.schema(schema, "input");
  const out = where === "query" ? jsonSchema(schema, "output").properties : undefined;
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === "path" || (js.required ?? []).includes(name),
    schema: wholeNumber(s as JsonSchema, out?.[name] as JsonSchema | undefined) ?? s,
  }));
}

/**
 * A whole number read from the query's text is described as the integer it is (with the bounds
 * and default of the parsed value), so a generated client takes `limit: 10`, not `"10"`.
 */
function wholeNumber(input: JsonSchema, output: JsonSchema | undefined): JsonSchema | undefined {
  if (input.type !== "string" || input.pattern !== WHOLE_NUMBER_TEXT || !output) return undefined;
  const { minimum, maximum, default: dflt } = output as Record<string, unknown>;
  return {
    type: "integer",
    ...(minimum !== undefined ? { minimum } : {}),
    ...(maximum !== undefined ? { maximum } : {}),
    ...(dflt !== undefined ? { default: dflt } : {}),
  };
}

const json = (schema: unknown) => ({ "application/json": { schema } });

/** Does the route name a connection (path id, or connection_id in its query or body)? Then 404 applies. */
function namesConnection(r: Route): boolean {
  if (r.params) return true;
  return [r.query, r.body].some(
    (s) => s !== undefined && JSON.stringify(jsonSchema(s, "input")).includes('"connection_id"'),
  );
}

/** The error bodies, once each in `components/schemas`. */
const ERROR_BODY: Record<ErrorStyle, { $ref: string }> = {
  envelope: { $ref: `${COMPONENT}ErrorEnvelope` },
  simple: { $ref: `${COMPONENT}SimpleError` },
};

/**
 * Answers given before a route's handler runs, by Node's HTTP parser, Fastify or the edge
 * (edge.ts), described once in `components/responses` and referenced by every operation. 414,
 * 413 and 415 are rendered by the error handler in the route's own error style; 431 and 405
 * come before any route is known, in the envelope.
 */
const PRE_ROUTE = {
  MethodNotAllowed: {
    status: 405,
    style: "envelope",
    description:
      "The path exists but not with this method (METHOD_NOT_ALLOWED); the Allow header and `details.allow` list the methods it has",
  },
  UriTooLong: {
    status: 414,
    description: `The URL (path and query) is longer than ${MAX_URL_LENGTH} bytes (URI_TOO_LONG); send fewer or shorter parameters`,
  },
  HeadersTooLarge: {
    status: 431,
    style: "envelope",
    description:
      "The request line and headers together exceed Node's 16 KiB header limit (HEADERS_TOO_LARGE); nothing was read",
  },
  PayloadTooLarge: {
    status: 413,
    description: "The body is larger than the route accepts (PAYLOAD_TOO_LARGE); the message names the limit",
  },
  UnsupportedMediaType: {
    status: 415,
    description: "The body is not sent as Content-Type: application/json (UNSUPPORTED_MEDIA_TYPE)",
  },
} as const satisfies Record<string, { status: number; style?: ErrorStyle; description: string }>;
type PreRoute = keyof typeof PRE_ROUTE;

const responseName = (name: PreRoute, style: ErrorStyle) =>
  "style" in PRE_ROUTE[name] || style === "envelope" ? name : `${name}Simple`;

function preRouteResponses() {
  const out: Record<string, { description: string; content: ReturnType<typeof json> }> = {};
  for (const [name, r] of Object.entries(PRE_ROUTE) as [PreRoute, (typeof PRE_ROUTE)[PreRoute]][])
    for (const style of "style" in r ? [r.style] : (["envelope", "simple"] as const))
      out[responseName(name, style)] = { description: r.description, content: json(ERROR_BODY[style]) };
  return out;
}

/** The error answers a route can give, each with the body it really sends. */
function errorResponses(r: Route) {
  const body = ERROR_BODY[r.errorStyle];
  const envelope = ERROR_BODY.envelope;
  const out: Record<string, unknown> = {};
  const add = (status: number, description: string, schema = body) =>
    (out[status] = { description, content: json(schema) });
  const pre = (name: PreRoute) =>
    (out[PRE_ROUTE[name].status] = { $ref: `#/components/responses/${responseName(name, r.errorStyle)}` });
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
  pre("MethodNotAllowed");
  // a body is read for every method but GET, whether the route takes one or not
  if (r.body || r.method !== "GET") {
    pre("PayloadTooLarge");
    pre("UnsupportedMediaType");
  }
  pre("UriTooLong");
  pre("HeadersTooLarge");
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

/** `GET /v1/connections/{id}` → `getV1ConnectionsId`: unique per operation, stable across releases. */
const operationId = (method: string, path: string) =>
  `${method.toLowerCase()}${path.replace(/[{}]/g, "").replace(/[/_-](\w)/g, (_, c: string) => c.toUpperCase())}`;

export function openApiDocument(
  routes: readonly Route[],
  tagDescriptions: Record<string, string>,
  publicUrl: string,
  version: string,
) {
  const components = new Components();
  components.named("ErrorEnvelope", envelopeError, "output");
  components.named("SimpleError", simpleError, "output");
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, "{$1}");
    const answers: Record<string, unknown> = {};
    for (const [status, schema] of Object.entries(r.responses)) {
      if (!schema) continue;
      answers[status] = {
        description: Number(status) === r.status ? "OK" : `Answered with ${status}`,
        ...(r.auth === "public" ? {} : { headers: rateLimitHeaders }),
        content: json(components.schema(schema, "output")),
      };
    }
    (paths[path] ??= {})[r.method.toLowerCase()] = {
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
      operationId: operationId(r.method, path),
      ...(r.auth === "public" ? { security: [] } : { "x-permission": r.auth, security: [{ apiKey: [] }] }),
      parameters: [...parameters(components, r.params, "path"), ...parameters(components, r.query, "query")],
      ...(r.body
        ? { requestBody: { required: true, content: json(components.schema(r.body, "input")) } }
        : {}),
      responses: { ...answers, ...errorResponses(r) },
    };
  }
  const tags = [...new Set(routes.map((r) => r.tag))].map((name) => {
    const description = tagDescriptions[name];
    if (!description)
      throw new Error(`openapi: the tag ${name} has no description (src/http/routes/index.ts)`);
    return { name, description };
  });
  return {
    openapi: "3.1.0",
    info: {
      title: "Vigil",
      version,
      description: "Monitoring of workflow automation platforms and AI gateways.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: publicUrl }],
    tags,
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer <API_KEY>" },
      },
      schemas: components.schemas,
      responses: preRouteResponses(),
    },
    paths,
  };
}
