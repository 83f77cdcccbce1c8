import type { Actor } from "../core/actor.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * The notifications outbox (sql/postgres/004_probes.sql). Rows are written by the incidents
 * domain in the transaction of the change that causes them; delivery claims, sends and marks them.
 */
export interface PendingMail extends Record<string, unknown> {
  id: string;
  recipient: string;
  subject: string;
  body: string;
  attempts: number;
}

/**
 * Claims up to `batch` e-mails due at `at`: counts the attempt and pushes the next one to
 * `claimUntil`, skipping rows another node is claiming (FOR UPDATE SKIP LOCKED).
 */
export async function claimDueMail(
  db: Queryable,
  c: { batch: number; at: Date; claimUntil: Date },
): Promise<PendingMail[]> {
  const r = await db.query<PendingMail>(
    `UPDATE notifications SET attempts = attempts + 1, next_attempt_at = $3
      WHERE id IN (SELECT id FROM notifications WHERE status = 'pending' AND next_attempt_at <= $2
                    ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING id, recipient, subject, body, attempts`,
    [c.batch, c.at.toISOString(), c.claimUntil.toISOString()],
  );
  return r.rows;
}

export async function markSent(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query("UPDATE notifications SET status = 'sent', sent_at = $2, last_error = NULL WHERE id = $1", [
    id,
    at.toISOString(),
  ]);
}

/** Records a failed attempt: retried at `retryAt`, or given up (`failed`). */
export async function markFailed(
  db: Queryable,
  f: { id: string; giveUp: boolean; error: string; retryAt: Date },
): Promise<void> {
  await db.query(
    "UPDATE notifications SET status = $2, last_error = $3, next_attempt_at = $4 WHERE id = $1",
    [f.id, f.giveUp ? "failed" : "pending", f.error, f.retryAt.toISOString()],
  );
}

/** Notes `reason` on pending e-mails not noted yet; returns those, so each is logged once. */
export async function noteUnsendable(db: Queryable, reason: string): Promise<PendingMail[]> {
  const r = await db.query<PendingMail>(
    `UPDATE notifications SET last_error = $1
      WHERE status = 'pending' AND last_error IS NULL
      RETURNING id, recipient, subject, body, attempts`,
    [reason],
  );
  return r.rows;
}

/** One alert as sent: the outbox rows of one e-mail to its recipients, grouped. */
export interface AlertRow extends Record<string, unknown> {
  id: string;
  kind: string;
  connection_id: string;
  connection_name: string;
  incident_id: string | null;
  incident_kind: string | null;
  incident_status: string | null;
  subject: string;
  body: string;
  created_at: Date;
  recipients: number | string;
  sent: number | string;
  pending: number | string;
  failed: number | string;
}

/**
 * The newest `limit` alerts (failures, recoveries, audits, budget warnings, anomalies) of the
 * connections the actor may see, newest first. The outbox holds one row per recipient; an alert
 * is those rows of one e-mail (same connection, incident, kind, text and time), with its
 * recipients and their delivery states counted. Recipient addresses are not returned.
 */
export async function selectAlertHistory(
  db: Queryable,
  actor: Actor,
  q: { limit: number },
): Promise<AlertRow[]> {
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  const visible = visibleConnectionsCondition(actor, param);
  const r = await db.query<AlertRow>(
    `SELECT min(n.id) AS id, n.kind, n.connection_id, c.service_name AS connection_name,
            n.incident_id, i.kind AS incident_kind, i.status AS incident_status,
            n.subject, n.body, n.created_at,
            count(*) AS recipients,
            count(*) FILTER (WHERE n.status = 'sent') AS sent,
            count(*) FILTER (WHERE n.status = 'pending') AS pending,
            count(*) FILTER (WHERE n.status = 'failed') AS failed
       FROM notifications n
       JOIN connections c ON c.id = n.connection_id
       LEFT JOIN incidents i ON i.id = n.incident_id
      WHERE ${visible}
      GROUP BY n.kind, n.connection_id, c.service_name, n.incident_id, i.kind, i.status, n.subject, n.body, n.created_at
      ORDER BY n.created_at DESC, min(n.id) DESC
      LIMIT ${param(q.limit)}`,
    params,
  );
  return r.rows;
}
