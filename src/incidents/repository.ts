import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { Position } from "../core/page.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * The incidents tables: `incidents` and their append-only `incident_events`, and what the
 * gateway's self-reported health writes (its check counters). The notifications outbox they
 * cause is the notifications feature's (its repository, re-exported here for the detectors).
 * Every function takes the caller's transaction; the domain (incidents.ts) decides, this file
 * only reads and writes rows.
 */
export {
  enqueueNotifications,
  enqueueRouted,
  enqueueToChannels,
  type NotificationKind,
  recipients,
} from "../notifications/repository.js";
export { pagedChannels as pagedChannelRows } from "../channels/repository.js";

export const INCIDENT_KINDS = ["availability", "missed_heartbeat", "anomaly", "budget", "slo_burn"] as const;
export const INCIDENT_STATUSES = ["open", "acknowledged", "resolved"] as const;
export type IncidentKind = (typeof INCIDENT_KINDS)[number];
export type IncidentStatus = (typeof INCIDENT_STATUSES)[number];
/**
 * Timeline events: the incident's own moves (`opened`, `acknowledged`, `resolved`), the
 * notifications decided (`notified`) or withheld by noise control (`suppressed`), and each
 * delivery attempt's outcome (`delivered`, `delivery_failed` to be retried, `delivery_given_up`).
 */
export const EVENT_KINDS = [
  "opened",
  "acknowledged",
  "resolved",
  "notified",
  "delivered",
  "delivery_failed",
  "delivery_given_up",
  "suppressed",
  "escalated",
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export interface IncidentRow extends Record<string, unknown> {
  id: string;
  connection_id: string;
  kind: IncidentKind;
  status: IncidentStatus;
  title: string;
  opened_at: Date;
  acknowledged_at: Date | null;
  resolved_at: Date | null;
}

export interface EventRow extends Record<string, unknown> {
  incident_id: string;
  at: Date;
  kind: EventKind;
  detail: unknown;
}

/** Inserts an open incident unless one of its kind is unresolved for the connection (the partial unique index). */
export async function insertOpenIncident(
  tx: Queryable,
  i: { connectionId: string; kind: IncidentKind; title: string; at: Date },
): Promise<string | null> {
  const id = randomUUID();
  const r = await tx.query(
    `INSERT INTO incidents (id, connection_id, kind, status, title, opened_at)
     VALUES ($1, $2, $3, 'open', $4, $5)
     ON CONFLICT (connection_id, kind) WHERE status <> 'resolved' DO NOTHING`,
    [id, i.connectionId, i.kind, i.title, i.at.toISOString()],
  );
  return r.rowCount === 0 ? null : id;
}

/** Moves one open incident to acknowledged (row-locked by the update); false when it is not open. */
export async function markAcknowledged(tx: Queryable, incidentId: string, at: Date): Promise<boolean> {
  const r = await tx.query(
    "UPDATE incidents SET status = 'acknowledged', acknowledged_at = $2 WHERE id = $1 AND status = 'open'",
    [incidentId, at.toISOString()],
  );
  return r.rowCount > 0;
}

/** Resolves the connection's unresolved incident of `kind` (open or acknowledged), if any. */
export async function markResolved(
  tx: Queryable,
  connectionId: string,
  kind: IncidentKind,
  at: Date,
): Promise<{ id: string; opened_at: Date } | null> {
  const r = await tx.query<{ id: string; opened_at: Date }>(
    `UPDATE incidents SET status = 'resolved', resolved_at = $3
      WHERE connection_id = $1 AND kind = $2 AND status <> 'resolved'
      RETURNING id, opened_at`,
    [connectionId, kind, at.toISOString()],
  );
  return r.rows[0] ?? null;
}

export async function incidentStatus(tx: Queryable, incidentId: string): Promise<IncidentStatus | null> {
  const r = await tx.query<{ status: IncidentStatus }>("SELECT status FROM incidents WHERE id = $1", [
    incidentId,
  ]);
  return r.rows[0]?.status ?? null;
}

/** Appends one timeline event; its `seq` (sql/postgres/009) orders the timeline. */
export async function appendEvent(
  tx: Queryable,
  incidentId: string,
  at: Date,
  kind: EventKind,
  detail: Record<string, unknown>,
): Promise<void> {
  await tx.query(
    "INSERT INTO incident_events (id, incident_id, at, kind, detail) VALUES ($1, $2, $3, $4, $5)",
    [randomUUID(), incidentId, at.toISOString(), kind, JSON.stringify(detail)],
  );
}

/**
 * One newest-first keyset page of the incidents of connections the actor may see, ordered by
 * (opened_at, id); `limit + 1` rows are read so the caller knows whether more follow.
 */
export async function selectIncidentPage(
  db: Queryable,
  actor: Actor,
  q: {
    connectionId?: string;
    status?: IncidentStatus;
    kind?: IncidentKind;
    since?: Date;
    until?: Date;
    limit: number;
    after?: Position;
  },
): Promise<IncidentRow[]> {
  // Fixed placeholders for the filters (an absent one is NULL and matches every row); the
  // visibility condition appends its own after them.
  const params: unknown[] = [
    q.connectionId ?? null,
    q.since?.toISOString() ?? null,
    q.until?.toISOString() ?? null,
    q.after?.ts.toISOString() ?? null,
    q.after?.key[0] ?? "",
    q.limit + 1,
    q.status ?? null,
    q.kind ?? null,
  ];
  const visible = visibleConnectionsCondition(actor, (v) => `$${params.push(v)}`);
  const r = await db.query<IncidentRow>(
    `SELECT x.id, x.connection_id, x.kind, x.status, x.title, x.opened_at, x.acknowledged_at, x.resolved_at
       FROM incidents x JOIN connections c ON c.id = x.connection_id
      WHERE ${visible}
        AND ($1::text IS NULL OR x.connection_id = $1)
        AND ($2::timestamptz IS NULL OR x.opened_at >= $2)
        AND ($3::timestamptz IS NULL OR x.opened_at < $3)
        AND ($4::timestamptz IS NULL OR (x.opened_at, x.id) < ($4, $5::text))
        AND ($7::text IS NULL OR x.status = $7)
        AND ($8::text IS NULL OR x.kind = $8)
      ORDER BY x.opened_at DESC, x.id DESC LIMIT $6`,
    params,
  );
  return r.rows;
}

/** One incident, and whether the actor may see its connection; undefined when it does not exist. */
export async function selectIncident(
  db: Queryable,
  actor: Actor,
  incidentId: string,
): Promise<(IncidentRow & { visible: boolean }) | undefined> {
  const params: unknown[] = [incidentId];
  const visible = visibleConnectionsCondition(actor, (v) => `$${params.push(v)}`);
  const r = await db.query<IncidentRow & { visible: boolean }>(
    `SELECT x.id, x.connection_id, x.kind, x.status, x.title, x.opened_at, x.acknowledged_at, x.resolved_at,
            ${visible} AS visible
       FROM incidents x JOIN connections c ON c.id = x.connection_id
      WHERE x.id = $1`,
    params,
  );
  return r.rows[0];
}

/** Locks one incident row for a change; its status, or null when it does not exist. */
/** What an incident's channel alerts name: its title and connection's account. */
export async function incidentFacts(
  tx: Queryable,
  incidentId: string,
): Promise<{
  title: string;
  kind: IncidentKind;
  status: IncidentStatus;
  connection_id: string;
  connection_name: string;
  user_id: string;
  organization_id: string | null;
} | null> {
  const r = await tx.query<{
    title: string;
    kind: IncidentKind;
    status: IncidentStatus;
    connection_id: string;
    connection_name: string;
    user_id: string;
    organization_id: string | null;
  }>(
    `SELECT i.title, i.kind, i.status, c.id AS connection_id, c.service_name AS connection_name, c.user_id, c.organization_id
       FROM incidents i JOIN connections c ON c.id = i.connection_id WHERE i.id = $1`,
    [incidentId],
  );
  return r.rows[0] ?? null;
}

export async function lockIncident(tx: Queryable, incidentId: string): Promise<IncidentStatus | null> {
  const r = await tx.query<{ status: IncidentStatus }>(
    "SELECT status FROM incidents WHERE id = $1 FOR UPDATE",
    [incidentId],
  );
  return r.rows[0]?.status ?? null;
}

/** The timelines of some incidents, each in causal order. */
export async function selectEvents(db: Queryable, incidentIds: readonly string[]): Promise<EventRow[]> {
  if (incidentIds.length === 0) return [];
  const r = await db.query<EventRow>(
    "SELECT incident_id, at, kind, detail FROM incident_events WHERE incident_id = ANY($1::text[]) ORDER BY incident_id, seq",
    [[...incidentIds]],
  );
  return r.rows;
}

/** Whether the connection has an unresolved incident of `kind`. */
export async function hasUnresolved(
  tx: Queryable,
  connectionId: string,
  kind: IncidentKind,
): Promise<boolean> {
  const r = await tx.query<{ open: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM incidents WHERE connection_id = $1 AND kind = $2 AND status <> 'resolved') AS open`,
    [connectionId, kind],
  );
  return r.rows[0]?.open ?? false;
}

/** The connection's open (not acknowledged, not resolved) incident of `kind`, locked; null when none. */
export async function lockOpenIncident(
  tx: Queryable,
  connectionId: string,
  kind: IncidentKind,
): Promise<string | null> {
  const r = await tx.query<{ id: string }>(
    `SELECT id FROM incidents WHERE connection_id = $1 AND kind = $2 AND status = 'open' FOR UPDATE`,
    [connectionId, kind],
  );
  return r.rows[0]?.id ?? null;
}

// --- the gateway's self-reported health, counted as its checks ---

/** A gateway after one of its heartbeats was counted as a check. */
export interface GatewayReportRow extends Record<string, unknown> {
  failures: number;
  successes: number;
  status: string;
  threshold: number | null;
  service_name: string;
  user_id: string;
  organization_id: string | null;
  /** The connection's own heartbeat grace in seconds (null: the default). */
  grace: number | null;
  /** Whether an availability / missed_heartbeat incident is unresolved (read in the same statement). */
  availability_open: boolean;
  missed_open: boolean;
}

/**
 * Counts one heartbeat of a gateway as a check, if it is newer than every heartbeat seen from it
 * (its time, then its id for two of the same time): the check counters, when it was last checked
 * and last heard from, and the newest heartbeat seen, in one statement. Null for a heartbeat that
 * is not newer (a resend of an old one: it counts for nothing) or a gateway that is gone.
 */
export async function recordGatewayReport(
  db: Queryable,
  h: { connectionId: string; heartbeatId: string; ts: Date; available: boolean; at: Date },
): Promise<GatewayReportRow | null> {
  const r = await db.query<GatewayReportRow>(
    `UPDATE connections SET
       consecutive_failures = CASE WHEN $4 THEN 0 ELSE consecutive_failures + 1 END,
       consecutive_successes = CASE WHEN $4 THEN consecutive_successes + 1 ELSE 0 END,
       last_check_at = $5, last_heartbeat_at = greatest(last_heartbeat_at, $5::timestamptz),
       heartbeat_newest_at = $2, heartbeat_newest_id = $3
     WHERE id = $1 AND service_type = 'gateway'
       AND (heartbeat_newest_at IS NULL OR heartbeat_newest_at < $2
            OR (heartbeat_newest_at = $2 AND heartbeat_newest_id IS DISTINCT FROM $3))
     RETURNING consecutive_failures AS failures, consecutive_successes AS successes, status,
               failure_threshold AS threshold, service_name, user_id, organization_id,
               heartbeat_grace_seconds AS grace,
               EXISTS (SELECT 1 FROM incidents i WHERE i.connection_id = connections.id
                        AND i.kind = 'availability' AND i.status <> 'resolved') AS availability_open,
               EXISTS (SELECT 1 FROM incidents i WHERE i.connection_id = connections.id
                        AND i.kind = 'missed_heartbeat' AND i.status <> 'resolved') AS missed_open`,
    [h.connectionId, h.ts.toISOString(), h.heartbeatId, h.available, h.at.toISOString()],
  );
  return r.rows[0] ?? null;
}
