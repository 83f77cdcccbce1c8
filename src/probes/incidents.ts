import { randomUUID } from "node:crypto";
import type { Queryable } from "../stores/relational/types.js";

/**
 * Availability incidents. Every change to an incident and its timeline event are written in the
 * caller's transaction, together with the e-mails it causes (the notifications outbox), so an
 * incident never changes without its event, and an e-mail is never decided twice.
 */
export interface IncidentContext {
  connectionId: string;
  connectionName: string;
  userId: string;
  organizationId: string | null;
  at: Date;
  publicUrl: string;
}

/** Who is told: the owner of a personal connection; the owners and admins of an organization's. */
export async function recipients(
  tx: Queryable,
  c: Pick<IncidentContext, "userId" | "organizationId">,
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

async function notify(
  tx: Queryable,
  c: IncidentContext,
  incidentId: string,
  kind: "failure" | "recovery",
  subject: string,
  body: string,
) {
  const to = await recipients(tx, c);
  for (const recipient of to) {
    await tx.query(
      `INSERT INTO notifications (id, connection_id, incident_id, kind, recipient, subject, body, created_at, next_attempt_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
      [randomUUID(), c.connectionId, incidentId, kind, recipient, subject, body, c.at.toISOString()],
    );
  }
  await event(tx, incidentId, c.at, "notified", { kind, recipients: to.length });
}

async function event(
  tx: Queryable,
  incidentId: string,
  at: Date,
  kind: string,
  detail: Record<string, unknown>,
) {
  await tx.query(
    "INSERT INTO incident_events (id, incident_id, at, kind, detail) VALUES ($1, $2, $3, $4, $5)",
    [randomUUID(), incidentId, at.toISOString(), kind, JSON.stringify(detail)],
  );
}

type Kind = "availability" | "missed_heartbeat";

/**
 * Opens an incident of `kind` for the connection unless one is unresolved already (a partial
 * unique index guarantees at most one); with its `opened` event and failure e-mails. Returns
 * the new incident's id, or null when one was already open.
 */
export async function openIncident(
  tx: Queryable,
  c: IncidentContext,
  kind: Kind,
  title: string,
  detail: Record<string, unknown>,
): Promise<string | null> {
  const id = randomUUID();
  const r = await tx.query(
    `INSERT INTO incidents (id, connection_id, kind, status, title, opened_at)
     VALUES ($1, $2, $3, 'open', $4, $5)
     ON CONFLICT (connection_id, kind) WHERE status <> 'resolved' DO NOTHING`,
    [id, c.connectionId, kind, title, c.at.toISOString()],
  );
  if (r.rowCount === 0) return null;
  await event(tx, id, c.at, "opened", detail);
  const reason =
    kind === "availability"
      ? `failed ${String(detail.failures)} consecutive checks.\nLast error: ${String(detail.error ?? detail.reason ?? "unknown")}`
      : `sent no heartbeat for ${String(detail.silentSeconds)} s (last at ${String(detail.lastHeartbeatAt)}).`;
  await notify(
    tx,
    c,
    id,
    "failure",
    `[Vigil] ${c.connectionName} is down`,
    `${c.connectionName} ${reason}\nSince: ${c.at.toISOString()}\n\n${c.publicUrl}/v1/connections/${c.connectionId}\n`,
  );
  return id;
}

/** Resolves the connection's unresolved incident of `kind`, if any, with its event and recovery e-mails. */
export async function resolveIncident(
  tx: Queryable,
  c: IncidentContext,
  kind: Kind,
  detail: Record<string, unknown>,
): Promise<string | null> {
  const r = await tx.query<{ id: string; opened_at: Date }>(
    `UPDATE incidents SET status = 'resolved', resolved_at = $3
      WHERE connection_id = $1 AND kind = $2 AND status <> 'resolved'
      RETURNING id, opened_at`,
    [c.connectionId, kind, c.at.toISOString()],
  );
  const row = r.rows[0];
  if (!row) return null;
  await event(tx, row.id, c.at, "resolved", { ...detail, automatic: true });
  const minutes = Math.max(1, Math.round((c.at.getTime() - new Date(row.opened_at).getTime()) / 60_000));
  await notify(
    tx,
    c,
    row.id,
    "recovery",
    `[Vigil] ${c.connectionName} has recovered`,
    `${c.connectionName} is available again after about ${minutes} min.\n\n${c.publicUrl}/v1/connections/${c.connectionId}\n`,
  );
  return row.id;
}
