import type { Route } from "../route.js";
import { alertRoutes } from "./alerts.js";
import { budgetRoutes } from "./budgets.js";
import { channelRoutes } from "./channels.js";
import { connectionRoutes } from "./connections.js";
import { healthRoutes } from "./health.js";
import { incidentRoutes } from "./incidents.js";
import { ingestRoutes } from "./ingest.js";
import { maintenanceRoutes } from "./maintenance.js";
import { readRoutes } from "./read.js";
import { sloRoutes } from "./slo.js";
import { statusPageRoutes } from "./status-pages.js";
import { usageRoutes } from "./usage.js";
import { webhookRoutes } from "./webhooks.js";

/**
 * The route table: every endpoint of the REST API, one declaration each (one file per resource).
 * `registerRoutes` serves them, `openApiDocument` describes them, and the security and response
 * tests walk them, so an endpoint added here is served, documented and tested at once.
 *
 * Adding an endpoint: declare it with `defineRoute` in its resource's file (request schemas,
 * a response schema per status, a handler that validates nothing itself and calls one
 * function), list it here, and give it a sample request in test/helpers/route-samples.ts
 * (the response and security tests fail until it has one).
 */
export const routes: readonly Route[] = [
  ...healthRoutes,
  ...connectionRoutes,
  ...usageRoutes,
  ...budgetRoutes,
  ...sloRoutes,
  ...ingestRoutes,
  ...readRoutes,
  ...incidentRoutes,
  ...alertRoutes,
  ...webhookRoutes,
  ...maintenanceRoutes,
  ...channelRoutes,
  ...statusPageRoutes,
];

/** The document's tags, one per resource file, each with what a reader finds under it. */
export const tags: Record<string, string> = {
  Health: "Liveness and readiness probes for load balancers and orchestrators; no key needed.",
  Connections: "The platforms Vigil watches: n8n instances, Make accounts and AI gateways.",
  Usage: "AI token usage and cost: record entries, read totals, and gateway heartbeats.",
  Budgets: "Spending limits per connection or account, with warnings at 50, 80 and 100 %.",
  SLOs: "Service level objectives per connection: availability over 28, 30 or 90 days, the error budget left and how fast it burns.",
  Read: "The stored series: availability samples and summaries, executions, analytics.",
  Incidents: "Incidents and anomalies, their timelines, and acknowledgement.",
  Alerts: "The alert history: every notification sent, by kind and outcome.",
  Webhooks: "Signed JSON webhooks that receive every alert.",
  Maintenance:
    "Maintenance windows: checks go on, flagged and left out of uptime, but no incident opens and nothing is sent.",
  Channels:
    "Notification channels (Slack, Teams, Discord, PagerDuty, Opsgenie, Telegram, ntfy, e-mail, webhooks), routing rules and escalation.",
  "Status pages":
    "Public status pages at /status/{slug}: chosen connections under public names, 90-day uptime, incident posts, a feed and badges.",
};
