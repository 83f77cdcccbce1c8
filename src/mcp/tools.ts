import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyBaseLogger } from "fastify";
import { z } from "zod";
import { type Permission, hasPermission, type UserActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { listAnomalies } from "../anomalies/list.js";
import { connectionHealth, HEALTH_HOURS } from "../availability/health.js";
import { listConnections } from "../connections/list.js";
import { listExecutions } from "../executions/list.js";
import { alertHistory } from "../notifications/history.js";
import { gatewayUsage, USAGE_PERIODS } from "../usage/gateway-usage.js";
import { connectionPlans } from "../retention/policy.js";
import { intervalSeconds } from "../probes/schedule.js";
import { HEARTBEAT_INTERVAL_SECONDS } from "../probes/heartbeats.js";
import { BURN_WINDOWS, judgeBurn } from "../slo/burn.js";
import { getSlo } from "../slo/slo.js";
import { missingPermission, toolError } from "./errors.js";

/**
 * The read-only tool server's tools: the spec's six (spec: Tool server) and get_slo_status. Each is one declaration: name,
 * description, the permission it needs, input and output schemas (zod; the SDK validates both
 * and publishes them as JSON Schema), and `run`, which calls the same transport-free query as
 * the REST route with the signed-in user as the actor and shapes a camelCase result. Results go
 * out as `structuredContent` plus a JSON text copy; failures as tool errors (errors.ts).
 */

const ROW_LIMIT = { min: 1, max: 100, default: 25 } as const;
/** list_connections returns every visible connection up to this many (then `truncated`). */
export const MAX_LISTED_CONNECTIONS = 1000;

const iso = z.string().describe("ISO 8601 timestamp (UTC)");
const connectionId = z
  .string({
    error: (issue) =>
      issue.input === undefined
        ? "connection_id is required (a connection id from list_connections)"
        : "connection_id must be a string (a connection id from list_connections)",
  })
  .min(1, "connection_id must not be empty")
  .max(200, "connection_id is at most 200 characters");
const limit = z
  .number({ error: "limit must be a number" })
  .int("limit must be a whole number")
  .min(ROW_LIMIT.min, `limit must be from ${ROW_LIMIT.min} to ${ROW_LIMIT.max}`)
  .max(ROW_LIMIT.max, `limit must be from ${ROW_LIMIT.min} to ${ROW_LIMIT.max}`)
  .default(ROW_LIMIT.default)
  .describe(`Most rows to return, ${ROW_LIMIT.min} to ${ROW_LIMIT.max} (default ${ROW_LIMIT.default}).`);

interface ToolDef<I extends z.ZodObject, O extends z.ZodObject> {
  name: string;
  title: string;
  description: string;
  permission: Permission;
  input: I;
  output: O;
  run: (ctx: AppContext, actor: UserActor, args: z.output<I>) => Promise<z.output<O>>;
}

const defineTool = <I extends z.ZodObject, O extends z.ZodObject>(d: ToolDef<I, O>) =>
  d as unknown as ToolDef<z.ZodObject, z.ZodObject>;

// --- list_connections ---

const connectionOut = z.object({
  id: z.string(),
  name: z.string(),
  platform: z.string().describe("workflow_a, workflow_b or gateway"),
  status: z.string().describe("active, inactive or error"),
  lastSyncAt: iso.nullable().describe("Last execution sync from the platform; null for gateways"),
  checkIntervalMinutes: z
    .number()
    .describe("Minutes between availability checks (for a gateway: the expected heartbeat interval)"),
  organization: z.object({ id: z.string(), name: z.string() }).nullable(),
});

async function connectionsOf(ctx: AppContext, actor: UserActor) {
  const { rows, total } = await listConnections(ctx, actor, {
    limit: MAX_LISTED_CONNECTIONS,
    offset: 0,
  });
  const plans = rows.length
    ? await connectionPlans(
        ctx.stores.db,
        rows.map((r) => r.id),
      )
    : new Map();
  const connections = rows.map((c) => {
    const seconds =
      c.service_type === "gateway"
        ? (c.heartbeat_interval_seconds ?? HEARTBEAT_INTERVAL_SECONDS)
        : intervalSeconds(plans.get(c.id) ?? "free", c.check_interval_seconds);
    return {
      id: c.id,
      name: c.service_name,
      platform: c.service_type,
      status: c.status,
      lastSyncAt: c.last_sync_at,
      checkIntervalMinutes: Math.round((seconds / 60) * 100) / 100,
      organization: c.organizations,
    };
  });
  return { connections, total, truncated: total > rows.length };
}

// --- list_recent_executions ---

const EXECUTION_STATUSES = ["success", "error", "running", "waiting", "cancelled"] as const;
const executionOut = z.object({
  connectionId: z.string(),
  executionId: z.string(),
  workflowId: z.string().nullable(),
  workflowName: z.string().nullable(),
  status: z.string().describe("success, error, running, waiting or cancelled (or a platform value as sent)"),
  mode: z.string().nullable(),
  startedAt: iso,
  stoppedAt: iso.nullable(),
  durationMs: z.number().nullable(),
  error: z.string().nullable().describe("Why a failed run failed, as the platform reported it"),
  errorNode: z.string().nullable().describe("The failing node or module"),
  lastNode: z.string().nullable().describe("The last step that ran"),
});

// --- list_anomalies ---

const anomalyOut = z.object({
  id: z.string(),
  connectionId: z.string(),
  metric: z
    .string()
    .describe(
      "What was unusual: response_time (p95 of checks, ms), failure_rate (failed checks, 0..1), " +
        "execution_failure_rate (0..1), gateway_latency (p95 of heartbeats, ms), token_volume (tokens in the window) " +
        "or token_spend (US dollars in the window)",
    ),
  status: z.string().describe("open or resolved"),
  detectedAt: iso,
  resolvedAt: iso.nullable(),
  windowStart: iso,
  windowEnd: iso,
  observed: z.number(),
  baselineMedian: z
    .number()
    .nullable()
    .describe("Median of the same clock window on each of the previous 7 days"),
  bandLow: z.number().nullable(),
  bandHigh: z.number().nullable().describe("Above this the window was anomalous"),
  baselineMean: z.number().describe("Mean of the 7-day baseline"),
  baselineStddev: z.number(),
  zScore: z.number().describe("Robust score: (observed - median) / the band's scale (1.4826 x MAD, floored)"),
  startedAt: iso.nullable().describe("Where the run of deviating minutes began"),
  endedAt: iso.nullable().describe("End of the last one-minute step above the band; null while open"),
});

// --- get_alert_history ---

const alertOut = z.object({
  id: z.string(),
  kind: z.string().describe("failure, recovery, audit, budget_warning, anomaly, invitation or slo_burn"),
  connectionId: z.string().nullable().describe("null for an account audit or a deleted connection"),
  connectionName: z.string().nullable(),
  incident: z
    .object({ id: z.string(), kind: z.string().nullable(), status: z.string().nullable() })
    .nullable(),
  subject: z.string(),
  message: z.string(),
  createdAt: iso,
  recipients: z.number().int(),
  delivery: z.object({ sent: z.number().int(), pending: z.number().int(), failed: z.number().int() }),
});

export const TOOLS = [
  defineTool({
    name: "list_connections",
    title: "List connections",
    description:
      "Lists every connection (monitored automation platform or AI gateway) the signed-in user can read: " +
      "their own plus those of every organization they belong to. Each has an id (pass it to the other tools " +
      "as connection_id), name, platform (workflow_a = self-hosted workflow automation, workflow_b = hosted " +
      "workflow automation, gateway = AI gateway), status (active, inactive or error), lastSyncAt and " +
      "checkIntervalMinutes. Start here when the user names a connection.",
    permission: "connections:read",
    input: z.strictObject({}),
    output: z.object({
      connections: z.array(connectionOut),
      total: z.number().int().describe("Connections visible in all"),
      truncated: z
        .boolean()
        .describe(`True when more than ${MAX_LISTED_CONNECTIONS} exist and only those are listed`),
    }),
    run: (ctx, actor) => connectionsOf(ctx, actor),
  }),
  defineTool({
    name: "get_connection_health",
    title: "Connection health",
    description:
      "Availability of one connection over the last N hours (1 to 48, default 24): number of checks, uptime " +
      "percent, average response time, the latest check and the latest failure with its error. Use it to " +
      "answer 'is X up?', 'how reliable was X today?' or 'why did X fail?'. Figures equal the REST " +
      "/v1/availability/summary (day window for 24 h); synthetic gap-fill samples count as checks and are " +
      "reported in syntheticChecks.",
    permission: "analytics:read",
    input: z.strictObject({
      connection_id: connectionId.describe("The connection's id (from list_connections)"),
      hours: z
        .number({ error: "hours must be a number" })
        .min(HEALTH_HOURS.min, `hours must be from ${HEALTH_HOURS.min} to ${HEALTH_HOURS.max}`)
        .max(HEALTH_HOURS.max, `hours must be from ${HEALTH_HOURS.min} to ${HEALTH_HOURS.max}`)
        .default(HEALTH_HOURS.default)
        .describe(
          `Window in hours up to now, ${HEALTH_HOURS.min} to ${HEALTH_HOURS.max} (default ${HEALTH_HOURS.default})`,
        ),
    }),
    output: z.object({
      connection: z.object({ id: z.string(), name: z.string(), platform: z.string(), status: z.string() }),
      windowHours: z.number(),
      since: iso,
      until: iso,
      totalChecks: z.number().int(),
      availableChecks: z.number().int(),
      syntheticChecks: z.number().int(),
      uptimePercent: z.number().nullable().describe("Percent of checks available; null without checks"),
      avgResponseTimeMs: z.number().nullable(),
      latestCheck: z
        .object({
          at: iso,
          available: z.boolean(),
          responseTimeMs: z.number().nullable(),
          synthetic: z.boolean(),
          source: z.string(),
        })
        .nullable(),
      latestFailure: z
        .object({ at: iso, error: z.string(), reason: z.string().nullable(), synthetic: z.boolean() })
        .nullable(),
    }),
    run: (ctx, actor, a) => connectionHealth(ctx, actor, { connectionId: a.connection_id, hours: a.hours }),
  }),
  defineTool({
    name: "list_recent_executions",
    title: "Recent workflow executions",
    description:
      "Most recent workflow runs, newest first, of one connection (connection_id) or of every connection the " +
      "user can read, optionally only those with one status (success, error, running, waiting, cancelled). " +
      "Failed runs include the platform's error and failing node. Use status=error to find what is failing.",
    permission: "analytics:read",
    input: z.strictObject({
      connection_id: connectionId.optional().describe("Only this connection's runs (from list_connections)"),
      status: z
        .enum(EXECUTION_STATUSES, { error: `status must be one of ${EXECUTION_STATUSES.join(", ")}` })
        .optional()
        .describe("Only runs with this status"),
      limit,
    }),
    output: z.object({
      executions: z.array(executionOut),
      hasMore: z.boolean().describe("More runs match than were returned"),
    }),
    run: async (ctx, actor, a) => {
      const page = await listExecutions(ctx, actor, {
        connectionId: a.connection_id,
        status: a.status,
        limit: a.limit,
        includeErrorDetails: true,
      });
      return {
        executions: page.rows.map((e) => ({
          connectionId: e.connection_id,
          executionId: e.execution_id,
          workflowId: e.workflow_id,
          workflowName: e.workflow_name,
          status: e.status,
          mode: e.mode,
          startedAt: e.started_at,
          stoppedAt: e.stopped_at,
          durationMs: e.duration_ms,
          error: e.error ?? null,
          errorNode: e.error_node ?? null,
          lastNode: e.last_node ?? null,
        })),
        hasMore: page.next !== null,
      };
    },
  }),
  defineTool({
    name: "get_gateway_usage",
    title: "AI gateway usage and spend",
    description:
      "Token usage and spend in US dollars of one gateway connection (platform gateway) over the last day, " +
      "7 days or 30 days (period day, week or month; default day), in total and by model (input and output " +
      "tokens, spend, requests). totalSpendUsd equals the REST PUT /v1/usage total for the same window. " +
      "Only for gateway connections; other connections give an error naming their platform.",
    permission: "usage:read",
    input: z.strictObject({
      connection_id: connectionId.describe("A gateway connection's id (from list_connections)"),
      period: z
        .enum(USAGE_PERIODS, { error: "period must be day, week or month" })
        .default("day")
        .describe("Rolling window up to now: day (24 h), week (7 days) or month (30 days); default day"),
    }),
    output: z.object({
      connection: z.object({ id: z.string(), name: z.string() }),
      period: z.enum(USAGE_PERIODS),
      since: iso,
      until: iso,
      totalSpendUsd: z.number(),
      totalSpendCents: z.number(),
      byModel: z.array(
        z.object({
          model: z.string(),
          inputTokens: z.number(),
          outputTokens: z.number(),
          spendUsd: z.number(),
          requests: z.number().int(),
        }),
      ),
      heartbeats: z.number().int(),
      totalRequests: z.number().int(),
      inputTokens: z.number(),
      outputTokens: z.number(),
      unitemizedSpendUsd: z.number(),
      usageEntriesSpendUsd: z.number(),
      requestsByModelEstimated: z.boolean(),
      unpricedModels: z.array(z.string()),
    }),
    run: (ctx, actor, a) => gatewayUsage(ctx, actor, { connectionId: a.connection_id, period: a.period }),
  }),
  defineTool({
    name: "list_anomalies",
    title: "Anomalies",
    description:
      "Statistical anomalies detected against 7-day baselines (p95 response times, check and execution failure " +
      "rates, gateway latency, token volume and spend per hour) on the connections the user can read, newest " +
      "first; status open or resolved narrows them. Each gives the hour's observed value, the baseline median " +
      "and band, the score, and when it started and ended.",
    permission: "analytics:read",
    input: z.strictObject({
      status: z
        .enum(["open", "resolved"], { error: "status must be open or resolved" })
        .optional()
        .describe("Only anomalies with this status"),
      limit,
    }),
    output: z.object({ anomalies: z.array(anomalyOut), hasMore: z.boolean() }),
    run: async (ctx, actor, a) => {
      const page = await listAnomalies(ctx, actor, { status: a.status, limit: a.limit });
      return {
        anomalies: page.rows.map((x) => ({
          id: x.id,
          connectionId: x.connection_id,
          metric: x.metric,
          status: x.status,
          detectedAt: x.detected_at,
          resolvedAt: x.resolved_at,
          windowStart: x.window_start,
          windowEnd: x.window_end,
          observed: x.observed,
          baselineMedian: x.baseline_median,
          bandLow: x.band_low,
          bandHigh: x.band_high,
          baselineMean: x.baseline_mean,
          baselineStddev: x.baseline_stddev,
          zScore: x.z_score,
          startedAt: x.started_at,
          endedAt: x.ended_at,
        })),
        hasMore: page.next !== null,
      };
    },
  }),
  defineTool({
    name: "get_alert_history",
    title: "Alert history",
    description:
      "The most recent alerts Vigil sent about the connections the user can read, newest first: failures " +
      "(a connection went down or stopped sending heartbeats), recoveries, audits, budget warnings and " +
      "anomalies, with the connection, the incident, the e-mail's subject and text, and delivery state.",
    permission: "connections:read",
    input: z.strictObject({ limit }),
    output: z.object({ alerts: z.array(alertOut), hasMore: z.boolean() }),
    run: (ctx, actor, a) => alertHistory(ctx, actor, { limit: a.limit }),
  }),
  defineTool({
    name: "get_slo_status",
    title: "SLO status and error budget",
    description:
      "The service level objective of one connection and how it stands: the objective (e.g. 0.999) over a " +
      "window of 28, 30 or 90 UTC days, the SLI (checks, failed, availability), the error budget (total 1; " +
      "consumed and remaining as fractions of it, remaining below 0 once the objective is missed), burn rates " +
      "over 5m, 30m, 1h, 6h, 1d and 3d (1 spends the budget exactly over the window; null without checks), " +
      "and which burn-rate alert condition holds now (page or ticket, as the SRE workbook's multi-window " +
      "alerts), if any. Use it to answer 'are we burning our error budget too fast?' or 'how much budget " +
      "is left for X?'. Without an SLO, objective and every figure are null. Figures equal REST GET " +
      "/v1/connections/{id}/slo.",
    permission: "connections:read",
    input: z.strictObject({
      connection_id: connectionId.describe("The connection's id (from list_connections)"),
    }),
    output: z.object({
      connectionId: z.string(),
      objective: z.number().nullable().describe("Share of checks that must succeed; null: no SLO set"),
      windowDays: z.number().int().nullable(),
      windowStart: iso.nullable(),
      sli: z
        .object({
          checks: z.number().int(),
          failed: z.number().int(),
          availability: z.number().nullable(),
        })
        .nullable(),
      errorBudget: z
        .object({ total: z.number(), consumed: z.number(), remaining: z.number() })
        .nullable()
        .describe("total 1 is the window's allowed failures; consumed and remaining are fractions of it"),
      burnRates: z
        .object(Object.fromEntries(Object.keys(BURN_WINDOWS).map((w) => [w, z.number().nullable()])))
        .nullable()
        .describe("Per trailing window: failed share of its checks / (1 - objective); null without checks"),
      alert: z
        .object({
          severity: z.enum(["page", "ticket"]),
          longWindow: z.string(),
          shortWindow: z.string(),
          threshold: z.number(),
        })
        .nullable()
        .describe("The most severe burn-rate alert condition that holds now, or null"),
    }),
    run: async (ctx, actor, a) => {
      const s = await getSlo(ctx, actor, a.connection_id);
      const v =
        s.burn_rates && s.objective !== null && s.window_days !== null
          ? judgeBurn(s.burn_rates, s.window_days, s.objective)
          : null;
      return {
        connectionId: s.connection_id,
        objective: s.objective,
        windowDays: s.window_days,
        windowStart: s.window_start,
        sli: s.sli,
        errorBudget: s.error_budget,
        burnRates: s.burn_rates,
        alert:
          v?.severity && v.alert && v.threshold !== null
            ? {
                severity: v.severity,
                longWindow: v.alert.long,
                shortWindow: v.alert.short,
                threshold: v.threshold,
              }
            : null,
      };
    },
  }),
];

export const TOOL_NAMES = TOOLS.map((t) => t.name);

const READ_ONLY: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};

/** The structured result and its JSON text copy, for clients that read only text. */
const ok = (structured: Record<string, unknown>): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(structured) }],
  structuredContent: structured,
});

/** Registers the tools on a server that acts for `actor`. */
export function registerTools(
  server: McpServer,
  ctx: AppContext,
  actor: UserActor,
  request: { id: string; log: FastifyBaseLogger },
): void {
  for (const tool of TOOLS) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.input,
        outputSchema: tool.output,
        annotations: { title: tool.title, ...READ_ONLY },
      },
      async (args: Record<string, unknown>) => {
        const connection = typeof args.connection_id === "string" ? args.connection_id : undefined;
        try {
          if (!hasPermission(actor, tool.permission)) throw missingPermission(tool.permission);
          return ok(await tool.run(ctx, actor, args));
        } catch (err) {
          return toolError(
            err,
            { tool: tool.name, connectionId: connection, requestId: request.id },
            request.log,
          );
        }
      },
    );
  }
}
