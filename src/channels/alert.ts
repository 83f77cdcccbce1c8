import type { PendingNotification } from "../notifications/repository.js";
import type { AlertEvent, ChannelAlert } from "./providers/types.js";

/** How loud each kind is at a provider. */
const SEVERITY: Record<string, ChannelAlert["severity"]> = {
  failure: "critical",
  escalation: "critical",
  anomaly: "warning",
  budget_warning: "warning",
  recovery: "info",
  acknowledged: "info",
  audit: "info",
  test: "info",
};

/** The dashboard's links of an alert (PUBLIC_URL): the incident's page, the connection's page, home. */
export function linksOf(publicUrl: string, connectionId: string | null, incidentId: string | null) {
  const base = publicUrl.replace(/\/+$/, "");
  return {
    incident: incidentId ? `${base}/incidents/${encodeURIComponent(incidentId)}` : null,
    connection: connectionId ? `${base}/connections/${encodeURIComponent(connectionId)}` : null,
    dashboard: `${base}/`,
  };
}

const defaultEvent = (n: PendingNotification): AlertEvent =>
  n.kind === "recovery"
    ? "resolve"
    : n.kind === "acknowledged"
      ? "acknowledge"
      : n.incident_id
        ? "trigger"
        : "info";

/** A claimed outbox row as a provider formats it. */
export function alertOf(
  n: PendingNotification,
  facts: { connectionName: string | null; incidentKind: string | null; publicUrl: string },
): ChannelAlert {
  return {
    id: n.id,
    kind: n.kind,
    event: n.event ?? defaultEvent(n),
    // an SLO burn that pages is critical; one worth a ticket is a warning (sent as a plain message)
    severity:
      n.kind === "slo_burn"
        ? (n.event ?? defaultEvent(n)) === "trigger"
          ? "critical"
          : "warning"
        : (SEVERITY[n.kind] ?? "info"),
    subject: n.subject,
    body: n.body,
    connectionId: n.connection_id,
    connectionName: facts.connectionName,
    incidentId: n.incident_id,
    incidentKind: facts.incidentKind,
    createdAt: new Date(n.created_at),
    links: linksOf(facts.publicUrl, n.connection_id, n.incident_id),
  };
}
