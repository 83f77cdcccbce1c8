import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput } from "../core/errors.js";
import { selectAlertHistory } from "./repository.js";

export const ALERT_HISTORY_LIMIT = { min: 1, max: 100, default: 25 } as const;

/** One alert Vigil sent about a connection: its rows of the notifications outbox (e-mails and webhooks), grouped. */
export interface Alert {
  id: string;
  /** `failure`, `recovery`, `audit`, `budget_warning`, `anomaly` or `slo_burn`. */
  kind: string;
  /** Null for an account audit (an API key, a membership) or once the connection was deleted. */
  connectionId: string | null;
  connectionName: string | null;
  /** The incident that caused it; null when the alert belongs to none (or it was removed). */
  incident: { id: string; kind: string | null; status: string | null } | null;
  subject: string;
  /** The alert's text. */
  message: string;
  createdAt: string;
  /** How many recipients it was addressed to: e-mail addresses and webhooks (neither is returned). */
  recipients: number;
  /** Delivery state of those e-mails and webhook posts. */
  delivery: { sent: number; pending: number; failed: number };
}

/**
 * The alert history: the newest alerts (failures, recoveries, audits, budget warnings,
 * anomalies) of the connections the caller may see, newest first, at most `limit` (1 to 100).
 */
export async function alertHistory(
  ctx: AppContext,
  actor: Actor,
  q: { limit?: number } = {},
): Promise<{ alerts: Alert[]; hasMore: boolean }> {
  const limit = q.limit ?? ALERT_HISTORY_LIMIT.default;
  if (!Number.isInteger(limit) || limit < ALERT_HISTORY_LIMIT.min || limit > ALERT_HISTORY_LIMIT.max)
    throw invalidInput(
      "limit",
      `must be a whole number from ${ALERT_HISTORY_LIMIT.min} to ${ALERT_HISTORY_LIMIT.max}`,
    );
  const rows = await selectAlertHistory(ctx.stores.db, actor, { limit: limit + 1 });
  return {
    alerts: rows.slice(0, limit).map((r) => ({
      id: r.id,
      kind: r.kind,
      connectionId: r.connection_id,
      connectionName: r.connection_name,
      incident: r.incident_id
        ? { id: r.incident_id, kind: r.incident_kind, status: r.incident_status }
        : null,
      subject: r.subject,
      message: r.body,
      createdAt: new Date(r.created_at).toISOString(),
      recipients: Number(r.recipients),
      delivery: { sent: Number(r.sent), pending: Number(r.pending), failed: Number(r.failed) },
    })),
    hasMore: rows.length > limit,
  };
}
