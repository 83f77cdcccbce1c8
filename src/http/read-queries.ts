import { z } from "zod";
import { ACK_NOTE_MAX } from "../incidents/acknowledge.js";
import { INCIDENT_KINDS, INCIDENT_STATUSES } from "../incidents/incidents.js";
import { NOTIFICATION_KINDS } from "../notifications/alerts.js";
import { boolParam, checkWindow, commonReadParams } from "./read-params.js";

const connectionId = z.uuid({ error: "must be a connection id (a UUID)" }).toLowerCase().optional();

export const availabilityQuery = z
  .strictObject({
    ...commonReadParams,
    connection_id: connectionId,
    is_available: boolParam.optional(),
    include_synthetic: boolParam.default(true),
  })
  .superRefine(checkWindow);

export const EXECUTION_STATUSES = ["running", "success", "error", "waiting", "cancelled"] as const;

export const executionsQuery = z
  .strictObject({
    ...commonReadParams,
    connection_id: connectionId,
    workflow_id: z.string().min(1).max(200).optional(),
    status: z
      .enum(EXECUTION_STATUSES, { error: `must be one of ${EXECUTION_STATUSES.join(", ")}` })
      .optional(),
    include_error_details: boolParam.default(false),
    group_by: z.enum(["workflow"], { error: "must be workflow" }).optional(),
  })
  .superRefine(checkWindow);

export const incidentsQuery = z
  .strictObject({
    ...commonReadParams,
    connection_id: connectionId,
    status: z.enum(INCIDENT_STATUSES, { error: `must be one of ${INCIDENT_STATUSES.join(", ")}` }).optional(),
    kind: z.enum(INCIDENT_KINDS, { error: `must be one of ${INCIDENT_KINDS.join(", ")}` }).optional(),
  })
  .superRefine(checkWindow);

/** The path of one incident. */
export const incidentParams = z.strictObject({
  id: z.uuid({ error: "must be an incident id (a UUID)" }).toLowerCase(),
});

/** An acknowledgement's body; none at all is an acknowledgement without a note. */
export const acknowledgeBody = z
  .strictObject({
    note: z
      .string({ error: "must be a string" })
      .max(ACK_NOTE_MAX, `must be at most ${ACK_NOTE_MAX} characters`)
      .nullable()
      .optional()
      .describe("why, or what is being done; kept in the incident's timeline"),
  })
  .default({});

export const alertsQuery = z
  .strictObject({
    ...commonReadParams,
    connection_id: connectionId,
    kind: z.enum(NOTIFICATION_KINDS, { error: `must be one of ${NOTIFICATION_KINDS.join(", ")}` }).optional(),
  })
  .superRefine(checkWindow);

export const summaryQuery = z
  .strictObject({
    ...commonReadParams,
    window: z.enum(["day", "week", "month"], { error: "must be day, week or month" }).default("day"),
    connection_id: connectionId,
  })
  .superRefine(checkWindow);

export const METRIC_TYPES = [
  "daily_executions",
  "daily_success_rate",
  "daily_avg_duration",
  "weekly_executions",
  "weekly_success_rate",
  "weekly_avg_duration",
  "monthly_executions",
  "monthly_success_rate",
  "monthly_avg_duration",
  "daily_availability",
  "weekly_availability",
  "monthly_availability",
  "monthly_gateway_cost",
] as const;
export type MetricType = (typeof METRIC_TYPES)[number];

export const analyticsQuery = z
  .strictObject({
    ...commonReadParams,
    metric_type: z.enum(METRIC_TYPES, { error: `must be one of ${METRIC_TYPES.join(", ")}` }),
    connection_id: connectionId,
  })
  .superRefine(checkWindow);

export const anomaliesQuery = z
  .strictObject({
    ...commonReadParams,
    connection_id: connectionId,
    status: z.enum(["open", "resolved"], { error: "must be open or resolved" }).optional(),
  })
  .superRefine(checkWindow);
