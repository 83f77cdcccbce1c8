import { z } from "zod";
import {
  connectionParams,
  createConnectionBody,
  listConnectionsQuery,
  updateConnectionBody,
} from "../connections/schema.js";
import type { Permission } from "../identity/principal.js";
import { heartbeatBody } from "../ingest/heartbeat-schema.js";
import {
  analyticsQuery,
  anomaliesQuery,
  availabilityQuery,
  executionsQuery,
  incidentsQuery,
  summaryQuery,
} from "../read/schemas.js";
import { listUsageQuery, usageEntry, usageTotalsQuery } from "../usage/schema.js";

/**
 * The REST API's description, generated from the zod schemas that validate each request, so
 * the document cannot drift from what the server accepts.
 */
interface RouteSpec {
  method: "get" | "post" | "put" | "delete";
  path: string;
  summary: string;
  auth: Permission | "usage-ingestion";
  status: 200 | 201;
  query?: z.ZodType;
  params?: z.ZodType;
  body?: z.ZodType;
}

const routes: RouteSpec[] = [
  {
    method: "get",
    path: "/v1/connections",
    summary: "List visible connections, newest first",
    auth: "connections:read",
    status: 200,
    query: listConnectionsQuery,
  },
  {
    method: "post",
    path: "/v1/connections",
    summary: "Create a connection",
    auth: "connections:write",
    status: 201,
    body: createConnectionBody,
  },
  {
    method: "get",
    path: "/v1/connections/{id}",
    summary: "One connection",
    auth: "connections:read",
    status: 200,
    params: connectionParams,
  },
  {
    method: "put",
    path: "/v1/connections/{id}",
    summary: "Change the fields given",
    auth: "connections:write",
    status: 200,
    params: connectionParams,
    body: updateConnectionBody,
  },
  {
    method: "delete",
    path: "/v1/connections/{id}",
    summary: "Delete a connection",
    auth: "connections:delete",
    status: 200,
    params: connectionParams,
  },
  {
    method: "post",
    path: "/v1/usage",
    summary: "Record one usage entry or up to 100",
    auth: "usage:write",
    status: 201,
    body: z.union([usageEntry, z.array(usageEntry).max(100)]),
  },
  {
    method: "get",
    path: "/v1/usage",
    summary: "Raw usage entries, newest first",
    auth: "usage:read",
    status: 200,
    query: listUsageQuery,
  },
  {
    method: "put",
    path: "/v1/usage",
    summary: "Usage totals of a connection or a run",
    auth: "usage:read",
    status: 200,
    query: usageTotalsQuery,
  },
  {
    method: "post",
    path: "/v1/gateway/ingest",
    summary: "Gateway heartbeat (usage-ingestion keys only)",
    auth: "usage-ingestion",
    status: 201,
    body: heartbeatBody,
  },
  {
    method: "get",
    path: "/v1/analytics",
    summary: "Metric rows by calendar bucket",
    auth: "analytics:read",
    status: 200,
    query: analyticsQuery,
  },
  {
    method: "get",
    path: "/v1/executions",
    summary: "Executions or per-workflow aggregates",
    auth: "analytics:read",
    status: 200,
    query: executionsQuery,
  },
  {
    method: "get",
    path: "/v1/availability",
    summary: "Availability samples",
    auth: "analytics:read",
    status: 200,
    query: availabilityQuery,
  },
  {
    method: "get",
    path: "/v1/availability/summary",
    summary: "Uptime per connection over a window",
    auth: "analytics:read",
    status: 200,
    query: summaryQuery,
  },
  {
    method: "get",
    path: "/v1/incidents",
    summary: "Incidents with their timelines",
    auth: "analytics:read",
    status: 200,
    query: incidentsQuery,
  },
  {
    method: "get",
    path: "/v1/anomalies",
    summary: "Anomalies",
    auth: "analytics:read",
    status: 200,
    query: anomaliesQuery,
  },
];

type JsonSchema = { properties?: Record<string, unknown>; required?: string[] } & Record<string, unknown>;
const toSchema = (s: z.ZodType) => z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as JsonSchema;

function parameters(schema: z.ZodType | undefined, where: "query" | "path") {
  if (!schema) return [];
  const js = toSchema(schema);
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === "path" || (js.required ?? []).includes(name),
    schema: s,
  }));
}

const errorBody = {
  type: "object",
  properties: {
    success: { const: false },
    error: {
      type: "object",
      properties: { code: { type: "string" }, message: { type: "string" }, details: { type: "object" } },
    },
  },
};

export function openApiDocument(publicUrl: string, version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    paths[r.path] ??= {};
    (paths[r.path] as Record<string, unknown>)[r.method] = {
      summary: r.summary,
      "x-permission": r.auth,
      security: [{ apiKey: [] }],
      parameters: [...parameters(r.params, "path"), ...parameters(r.query, "query")],
      ...(r.body
        ? { requestBody: { required: true, content: { "application/json": { schema: toSchema(r.body) } } } }
        : {}),
      responses: {
        [r.status]: { description: "OK" },
        400: {
          description: "A field or parameter is invalid; the message names it",
          content: { "application/json": { schema: errorBody } },
        },
        401: { description: "Missing, unknown or revoked API key (INVALID_API_KEY)" },
        403: { description: "Missing permission, or no access to the connection or organization" },
        429: { description: "Rate limit exceeded; see Retry-After" },
        503: {
          description:
            "A store is unavailable, or (POST /v1/usage, /v1/gateway/ingest) the ingest backlog is full; nothing was stored; see Retry-After",
        },
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
