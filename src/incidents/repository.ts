import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { Position } from "../core/page.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * The incidents tables: `incidents`, their append-only `incident_events` and the
 * `notifications` outbox rows they cause. Every function takes the caller's transaction; the
 * domain (incidents.ts) decides, this file only reads and writes rows.
 */
export type IncidentKind = "availability" | "missed_heartbeat" | "anomaly" | "budget";
export type IncidentStatus = "open" | "acknowledged" | "resolved";
export type EventKind = "opened" | "acknowledged" | "resolved" | "notified";
export type NotificationKind = "failure" | "recovery" | "audit" | "budget_warning" | "anomaly";

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

/** Who is told: the owner of a personal connection; the owners and admins of an organization's. */
export async function recipients(
  tx: Queryable,
  c: { userId: string; organizationId: string | null },
): Promise<string[]> {
  const r = c.organizationId
    ? await tx.query<{ email: string }>(
        `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.organization_id = $1 AND m.role IN ('owner', 'admin') ORDER BY u.email`,
        [c.organizationId],
      )
    : await tx.query<{ email: string }>("SELECT email FROM users WHERE id = $1", [c.userId]);
  return r.rows.map((row) => row.email);
}

/** Queues one e-mail per recipient in the outbox, due at once. */
export async function enqueueNotifications(
  tx: Queryable,
  n: {
    connectionId: string;
    incidentId: string;
    kind: NotificationKind;
    recipients: readonly string[];
    subject: string;
    body: string;
    at: Date;
  },
): Promise<void> {
  for (const recipient of n.recipients) {
    await tx.query(
      `INSERT INTO notifications (id, connection_id, incident_id, kind, recipient, subject, body, created_at, next_attempt_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
      [randomUUID(), n.connectionId, n.incidentId, n.kind, recipient, n.subject, n.body, n.at.toISOString()],
    );
  }
}

/**
 * One newest-first keyset page of the incidents of connections the actor may see, ordered by
 * (opened_at, id); `limit + 1` rows are read so the caller knows whether more follow.
 */
export async function selectIncidentPage(
  db: Queryable,
  actor: Actor,
  q: { connectionId?: string; since?: Date; until?: Date; limit: number; after?: Position },
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
      ORDER BY x.opened_at DESC, x.id DESC LIMIT $6`,
    params,
  );
  return r.rows;
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
