import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.js";
import { analytics } from "../../read/analytics.js";
import { listAnomalies } from "../../read/anomalies.js";
import { availabilitySummary, listAvailability } from "../../read/availability.js";
import { listExecutions } from "../../read/executions.js";
import { listIncidents } from "../../read/incidents.js";
import {
  analyticsQuery,
  anomaliesQuery,
  availabilityQuery,
  executionsQuery,
  incidentsQuery,
  summaryQuery,
} from "../../read/schemas.js";
import { principalOf } from "../auth.js";
import { parseOr400 } from "../validation.js";

/** The read API (analytics:read): `{data, pagination}`; errors in the envelope. */
export async function readRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const config = { auth: { permission: "analytics:read" } } as const;
  app.get("/v1/availability", { config }, async (req) =>
    listAvailability(ctx, principalOf(req), parseOr400(availabilityQuery, req.query, "query")),
  );
  app.get("/v1/availability/summary", { config }, async (req) =>
    availabilitySummary(ctx, principalOf(req), parseOr400(summaryQuery, req.query, "query")),
  );
  app.get("/v1/executions", { config }, async (req) =>
    listExecutions(ctx, principalOf(req), parseOr400(executionsQuery, req.query, "query")),
  );
  app.get("/v1/analytics", { config }, async (req) =>
    analytics(ctx, principalOf(req), parseOr400(analyticsQuery, req.query, "query")),
  );
  app.get("/v1/anomalies", { config }, async (req) =>
    listAnomalies(ctx, principalOf(req), parseOr400(anomaliesQuery, req.query, "query")),
  );
  app.get("/v1/incidents", { config }, async (req) =>
    listIncidents(ctx, principalOf(req), parseOr400(incidentsQuery, req.query, "query")),
  );
}
