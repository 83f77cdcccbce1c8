import { z } from "zod";
import { ANOMALY_METRICS } from "../../anomalies/baselines.js";
import { EXECUTION_STATUSES, METRIC_TYPES } from "../read-queries.js";
import { cursorPage, cursorPagination, oneOf, timestamp } from "./common.js";

export const availabilitySample = z.object({
  connection_id: z.string(),
  checked_at: timestamp,
  available: z.boolean(),
  response_time_ms: z.number().nullable(),
  status_code: z.number().int().nullable(),
  reason: z.string().nullable(),
  error: z.string().nullable(),
  synthetic: z.boolean().describe("true for a gap-fill sample the service wrote itself"),
  source: z.string(),
  maintenance: z
    .boolean()
    .describe(
      "true when a maintenance window covered the connection at the check (docs/maintenance.md): the check is kept but left out of uptime",
    ),
});

export const availabilitySummaryRow = z.object({
  connection_id: z.string(),
  window: oneOf(["day", "week", "month"]),
  since: timestamp,
  until: timestamp,
  checks: z.number().int().describe("checks in the window, those under maintenance not included"),
  available_checks: z.number().int(),
  maintenance_checks: z
    .number()
    .int()
    .describe(
      "checks taken under a maintenance window (docs/maintenance.md): not counted in checks or uptime",
    ),
  uptime_percent: z
    .number()
    .nullable()
    .describe("percent of checks available; null when every check was under maintenance"),
  avg_response_time_ms: z.number().nullable(),
});

export const execution = z.object({
  connection_id: z.string(),
  execution_id: z.string(),
  workflow_id: z.string().nullable(),
  workflow_name: z
    .string()
    .nullable()
    .describe("the workflow's (n8n) or scenario's (Make) name as the platform last reported it"),
  status: z
    .string()
    .describe(
      `one of ${EXECUTION_STATUSES.join(", ")}; a platform status Vigil cannot map is stored as sent (docs/operations.md: Platforms as they really behave)`,
    ),
  mode: z.string().nullable(),
  started_at: timestamp,
  stopped_at: timestamp.nullable(),
  duration_ms: z.number().nullable(),
  error: z
    .string()
    .nullable()
    .optional()
    .describe("only with include_error_details=true: the platform's message"),
  error_node: z
    .string()
    .nullable()
    .optional()
    .describe("only with include_error_details=true: the failing node (n8n) or module (Make)"),
  last_node: z
    .string()
    .nullable()
    .optional()
    .describe("only with include_error_details=true: the last step that ran"),
});

export const workflowAggregate = z.object({
  connection_id: z.string(),
  workflow_id: z.string().nullable(),
  workflow_name: z.string().nullable(),
  runs: z.number().int(),
  successes: z.number().int(),
  errors: z.number().int(),
  success_rate: z.number().nullable(),
  avg_duration_ms: z.number().nullable(),
});

/** Executions, or with group_by=workflow one aggregate row per workflow. */
export const executionsPage = z.object({
  data: z.union([z.array(execution), z.array(workflowAggregate)]),
  pagination: cursorPagination,
});

export const metricRow = z.object({
  connection_id: z.string(),
  metric_type: oneOf(METRIC_TYPES),
  bucket_start: timestamp,
  value: z.number().nullable(),
  sample_count: z.number().int(),
});

/** Date columns the query code types as nullable although the table requires them. */
const requiredTime = z.string().nullable().pipe(timestamp);

export const anomaly = z.object({
  id: z.string(),
  connection_id: z.string(),
  metric: oneOf(ANOMALY_METRICS).describe(
    "response_time and gateway_latency: p95 (ms); failure_rate and execution_failure_rate: 0..1; " +
      "token_volume (tokens) and token_spend (US dollars) over the window",
  ),
  status: oneOf(["open", "resolved"]),
  detected_at: requiredTime,
  resolved_at: timestamp.nullable(),
  window_start: requiredTime.describe("start of the window that opened the anomaly (15 minutes by default)"),
  window_end: requiredTime.describe("end of that window: the one-minute evaluation step that opened it"),
  observed: z.number().describe("the metric over that window"),
  baseline_mean: z.number(),
  baseline_stddev: z.number(),
  z_score: z.number(),
  baseline_median: z.number().nullable(),
  baseline_mad: z.number().nullable(),
  band_low: z.number().nullable(),
  band_high: z.number().nullable(),
  started_at: timestamp.nullable().describe("where the run of deviating minutes began"),
  ended_at: timestamp.nullable().describe("end of the last evaluation step above the band; null while open"),
});

export const availabilityPage = cursorPage(availabilitySample);
export const summaryPage = cursorPage(availabilitySummaryRow);
export const metricPage = cursorPage(metricRow);
export const anomalyPage = cursorPage(anomaly);
