import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { requireReadable } from "../connections/scope.js";
import {
  type AuditEvent,
  type Channel,
  type DeliveryStatus,
  NOTIFICATION_KINDS,
  type NotificationKind,
  selectAlertPage,
} from "./repository.js";

export { NOTIFICATION_KINDS };
export type { NotificationKind };

/** One notification of the alert history (GET /v1/alerts): one alert to one recipient (an e-mail address or a webhook). */
export interface AlertRecord {
  id: string;
  kind: NotificationKind;
  channel: Channel;
  /**
   * The e-mail address it goes to; for a webhook, its URL's origin (`https://hooks.example.com`):
   * the whole URL may hold a token.
   */
  recipient: string;
  subject: string;
  body: string;
  /** `pending` (waiting or retrying), `sent`, `failed` (given up) or `suppressed` (withheld by noise control). */
  status: DeliveryStatus;
  /** Delivery attempts so far. */
  attempts: number;
  /** The last attempt's error, or why it was withheld or not sent. */
  last_error: string | null;
  created_at: string;
  /** When its first attempt was due: later than created_at when noise control deferred it. */
  due_at: string;
  sent_at: string | null;
  /** Null for an account audit, or once the connection was deleted (the subject keeps its name). */
  connection_id: string | null;
  connection_name: string | null;
  incident_id: string | null;
  anomaly_id: string | null;
  /** For kind `audit`: what happened. */
  audit_event: AuditEvent | null;
  /** The organization the alert belongs to; null for a personal account's. */
  organization_id: string | null;
  /** For channel `webhook`: the webhook (GET /v1/webhooks); null for an e-mail, and once the webhook was deleted. */
  webhook_id: string | null;
  /** The channel of /v1/channels it went to; null for the account owners' e-mail, a /v1/webhooks webhook, and once the channel was deleted. */
  channel_id: string | null;
}

export interface AlertQuery extends PageRequest, Window {
  connectionId?: string;
  kind?: NotificationKind;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

/**
 * The alert history the actor may see, newest first (by creation time, then id): every
 * notification of the accounts whose connections the actor may see, audits and those of deleted
 * connections included. Naming a connection the actor may not see is forbidden; an unknown one is
 * not found. `next` continues after the last row returned.
 */
export async function listAlerts(ctx: AppContext, actor: Actor, q: AlertQuery): Promise<Page<AlertRecord>> {
  if (q.connectionId) await requireReadable(ctx, actor, q.connectionId);
  const found = await selectAlertPage(ctx.stores.db, actor, q);
  const more = found.length > q.limit;
  const rows = more ? found.slice(0, q.limit) : found;
  const last = rows[rows.length - 1];
  return {
    rows: rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      channel: r.channel,
      recipient: r.recipient,
      subject: r.subject,
      body: r.body,
      status: r.status,
      attempts: Number(r.attempts),
      last_error: r.last_error,
      created_at: new Date(r.created_at).toISOString(),
      due_at: new Date(r.due_at ?? r.created_at).toISOString(),
      sent_at: iso(r.sent_at),
      connection_id: r.connection_id,
      connection_name: r.connection_name,
      incident_id: r.incident_id,
      anomaly_id: r.anomaly_id,
      audit_event: (r.audit_event as AuditEvent | null) ?? null,
      organization_id: r.organization_id,
      webhook_id: r.webhook_id,
      channel_id: r.channel_id,
    })),
    next: more && last ? { ts: new Date(last.created_at), key: [last.id] } : null,
  };
}
