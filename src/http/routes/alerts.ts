import { listAlerts } from "../../notifications/alerts.js";
import { alertsQuery } from "../read-queries.js";
import { alertPage } from "../responses/alerts.js";
import { defineRoute } from "../route.js";
import { keysetPage, windowOf } from "./incidents.js";

/** The alert history (analytics:read): the read API's cursor pages over the notifications outbox. */
export const alertRoutes = [
  defineRoute({
    tag: "Alerts",
    method: "GET",
    path: "/v1/alerts",
    summary: "Alert history: every notification Vigil decided to send",
    description:
      "One row per notification and recipient, newest first (by created_at): failures, recoveries, audits, " +
      "budget warnings and anomalies, with channel, recipient, subject, delivery status and attempts, the " +
      "connection and the incident or anomaly. Filters: `kind`, `connection_id`. Audits (API key created or " +
      "revoked, connection credentials changed, connection deleted, membership changed) belong to the account " +
      "and are listed without a connection_id filter; alerts of a deleted connection stay listed.",
    auth: "analytics:read",
    errorStyle: "envelope",
    status: 200,
    query: alertsQuery,
    responses: { 200: alertPage },
    handler: ({ ctx, actor, query: q }) => {
      const bound = { endpoint: "alerts", ...(q.kind !== undefined ? { kind: q.kind } : {}) };
      return keysetPage(ctx, actor, q, bound, (after) =>
        listAlerts(ctx, actor, { ...windowOf(q), kind: q.kind, limit: q.limit, after }),
      );
    },
  }),
];
