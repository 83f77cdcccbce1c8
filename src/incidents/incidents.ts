/**
 * The incidents domain: every detector (availability checks, missed heartbeats, anomalies,
 * budgets) opens and resolves incidents through these functions, in the caller's transaction,
 * and a person acknowledges them (acknowledge.ts); e-mail delivery records each attempt here.
 *
 * Invariants:
 * - at most one unresolved incident per connection and kind (a partial unique index);
 * - the lifecycle is open -> acknowledged -> resolved (resolve also from open);
 * - every change writes its timeline event, and the e-mails it causes (the notifications
 *   outbox), in the same transaction: an incident never changes without its event, and an
 *   e-mail is never decided twice;
 * - a change locks the incident row before appending events, so a timeline reads back in
 *   causal order by its sequence column (append-only: no event is ever changed or removed);
 * - noise control: at most one failure e-mail per connection every
 *   `failureMailIntervalSeconds`; one decided within the interval waits for its end, and is
 *   withheld (`suppressed`, recorded in the timeline) if its incident resolves or is
 *   acknowledged first, and then so is the recovery e-mail, since nobody was told of the
 *   failure. Nothing is ever sent again for an incident that stays open (no reminders).
 */

import type { Actor } from "../core/actor.js";
import { conflict, notFound } from "../core/errors.js";
import {
  incidentNotificationCounts,
  lastFailureMailDue,
  suppressDeferred,
} from "../notifications/repository.js";
import { underMaintenance } from "../maintenance/repository.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  appendEvent,
  enqueueRouted,
  enqueueToChannels,
  type EventKind,
  incidentFacts,
  pagedChannelRows,
  type IncidentKind,
  incidentStatus,
  insertOpenIncident,
  lockIncident,
  lockOpenIncident,
  markAcknowledged,
  markResolved,
  type NotificationKind,
  recipients,
} from "./repository.js";
import { type IncidentTarget, type MailText, openingMail, recoveryMail } from "./templates.js";

export type { IncidentKind, IncidentStatus } from "./repository.js";
export { EVENT_KINDS, INCIDENT_KINDS, INCIDENT_STATUSES } from "./repository.js";
export type { IncidentTarget, MailText } from "./templates.js";

/** ALERT_FAILURE_MAIL_INTERVAL_SECONDS when the caller does not pass the configured value. */
export const DEFAULT_FAILURE_MAIL_INTERVAL_SECONDS = 900;

/** What a detector asks for when it opens an incident. */
export interface OpenIncident {
  kind: IncidentKind;
  title: string;
  /** The `opened` event's detail; the default e-mail of the kind reads its facts from it. */
  detail: Record<string, unknown>;
  at: Date;
  /** Base of the links in e-mails (config.publicUrl). */
  publicUrl: string;
  /** The failure e-mail, when the kind's default text does not fit. */
  mail?: MailText;
  /** Noise control (config.alerts.failureMailIntervalSeconds): at most one failure e-mail per connection per interval. */
  failureMailIntervalSeconds?: number;
  /** The anomaly an `anomaly` incident reports: its e-mails name it in the alert history. */
  anomalyId?: string | null;
}

/**
 * Opens an incident of `kind` for the connection unless one is unresolved already, with its
 * `opened` event and failure e-mails. Returns the new incident's id, or null when one was open
 * or the connection is under maintenance (nothing is then recorded or sent).
 */
export async function openIncident(
  tx: Queryable,
  target: IncidentTarget,
  o: OpenIncident,
): Promise<string | null> {
  // a connection under maintenance (docs/maintenance.md): no incident opens, nothing is sent;
  // a budget is about money, not planned work: it opens all the same (it would not open later)
  if (o.kind !== "budget" && (await underMaintenance(tx, target.connectionId, o.at))) return null;
  const id = await insertOpenIncident(tx, {
    connectionId: target.connectionId,
    kind: o.kind,
    title: o.title,
    at: o.at,
  });
  if (!id) return null;
  await appendEvent(tx, id, o.at, "opened", o.detail);
  const mail =
    o.mail ??
    openingMail(o.kind, { target, detail: o.detail, at: o.at, openedAt: o.at, publicUrl: o.publicUrl });
  await notify(tx, target, id, o.at, mail, o.failureMailIntervalSeconds, o.anomalyId);
  return id;
}

export interface ResolveIncident {
  kind: IncidentKind;
  /** The `resolved` event's detail. */
  detail: Record<string, unknown>;
  at: Date;
  publicUrl: string;
  /** Why it resolved, in words (`two consecutive successful checks`), recorded in the event. */
  reason?: string;
  /** Set by a detector that saw the cause go away; false for a person's resolution. */
  automatic?: boolean;
  mail?: MailText;
  /** The anomaly whose end resolves an `anomaly` incident (named by its recovery e-mail). */
  anomalyId?: string | null;
}

/**
 * Resolves the connection's unresolved incident of `kind` (open or acknowledged), if any, with
 * its `resolved` event and recovery e-mails. A failure e-mail still waiting for the end of the
 * noise-control interval is withheld, and then the recovery e-mail too (both recorded as
 * `suppressed`). Returns its id, or null when none was unresolved.
 */
export async function resolveIncident(
  tx: Queryable,
  target: IncidentTarget,
  r: ResolveIncident,
): Promise<string | null> {
  const row = await markResolved(tx, target.connectionId, r.kind, r.at);
  if (!row) return null;
  await appendEvent(tx, row.id, r.at, "resolved", {
    ...r.detail,
    ...(r.reason ? { reason: r.reason } : {}),
    automatic: r.automatic ?? true,
  });
  await withhold(tx, row.id, r.at, "the incident resolved before it was due");
  const mail =
    r.mail ??
    recoveryMail(r.kind, {
      target,
      detail: r.detail,
      at: r.at,
      openedAt: new Date(row.opened_at),
      publicUrl: r.publicUrl,
    });
  const sent = await incidentNotificationCounts(tx, row.id);
  if (sent.suppressed > 0 && sent.other === 0)
    await appendEvent(tx, row.id, r.at, "suppressed", {
      kind: mail.kind,
      reason: "no e-mail told of the incident, so none tells of its end",
    });
  else await notify(tx, target, row.id, r.at, mail, undefined, r.anomalyId);
  return row.id;
}

/**
 * Tells everyone of a change of the connection's open incident of `kind` (an SLO burn that now
 * pages): its alerts and `notified` event. Nothing when the incident is not open: once someone
 * acknowledged it, nothing more is sent until it resolves (no reminders). Returns its id or null.
 */
export async function notifyOpenIncident(
  tx: Queryable,
  target: IncidentTarget,
  kind: IncidentKind,
  at: Date,
  mail: MailText,
): Promise<string | null> {
  const id = await lockOpenIncident(tx, target.connectionId, kind);
  if (!id) return null;
  await notify(tx, target, id, at, mail);
  return id;
}

/** Who acknowledged, as the timeline records it. */
export type ActorRef =
  | { type: "api_key"; key_id: string; user_id: string; organization_id: string | null }
  | { type: "user"; user_id: string; via: "oauth" | "session" }
  | { type: "ingestion_key"; key_id: string; user_id: string }
  | { type: "system"; job: string };

export function actorRef(actor: Actor): ActorRef {
  switch (actor.type) {
    case "api_key":
      return {
        type: "api_key",
        key_id: actor.keyId,
        user_id: actor.userId,
        organization_id: actor.organizationId,
      };
    case "user":
      return { type: "user", user_id: actor.userId, via: actor.via };
    case "ingestion_key":
      return { type: "ingestion_key", key_id: actor.keyId, user_id: actor.userId };
    case "system":
      return { type: "system", job: actor.job };
  }
}

export interface AcknowledgeIncident {
  incidentId: string;
  /** Who acknowledged (an actor's reference, or a plain id), recorded in the event. */
  by: ActorRef | string;
  note?: string | null;
  at: Date;
}

/**
 * Moves an open incident to acknowledged, with its `acknowledged` event; no e-mail, and a failure
 * e-mail still deferred by noise control is withheld (someone is on it: no reminder). Throws
 * not_found for an unknown incident and conflict when it is already acknowledged or resolved.
 * The caller checks the actor may see the incident's connection.
 */
export async function acknowledgeIncident(
  tx: Queryable,
  a: AcknowledgeIncident,
): Promise<{ id: string; status: "acknowledged" }> {
  if (!(await markAcknowledged(tx, a.incidentId, a.at))) {
    const status = await incidentStatus(tx, a.incidentId);
    if (!status) throw notFound(`Incident ${a.incidentId} not found`);
    throw conflict(`Incident ${a.incidentId} is ${status}; only an open incident can be acknowledged`);
  }
  await appendEvent(tx, a.incidentId, a.at, "acknowledged", { by: a.by, note: a.note ?? null });
  await withhold(tx, a.incidentId, a.at, "the incident was acknowledged before it was due");
  await acknowledgeOnPagers(tx, a.incidentId, a.at);
  return { id: a.incidentId, status: "acknowledged" };
}

/**
 * Acknowledges the incident at the paging providers (PagerDuty, Opsgenie) its trigger reached:
 * one `acknowledged` row per channel, recorded as `notified` in the timeline.
 */
async function acknowledgeOnPagers(tx: Queryable, incidentId: string, at: Date): Promise<void> {
  const paged = await pagedChannelRows(tx, incidentId);
  if (paged.length === 0) return;
  const facts = await incidentFacts(tx, incidentId);
  if (!facts) return;
  const rows = await enqueueToChannels(tx, {
    kind: "acknowledged",
    account: { userId: facts.user_id, organizationId: facts.organization_id },
    connectionId: facts.connection_id,
    incidentId,
    subject: `[Vigil] ${facts.connection_name}: incident acknowledged`,
    body: `${facts.title}\nAcknowledged in Vigil at ${at.toISOString()}.\n`,
    at,
    channels: paged,
    event: "acknowledge",
  });
  await appendEvent(tx, incidentId, at, "notified", {
    kind: "acknowledged",
    channels: [...new Set(rows.map((r) => r.channel))],
    recipients: 0,
    webhooks: 0,
    channel_ids: paged.map((c) => c.id),
    notification_ids: rows.map((r) => r.id),
  });
}

/** One attempt to deliver one notification of an incident, as the delivery job saw it end. */
export interface DeliveryAttempt {
  incidentId: string;
  notificationId: string;
  kind: NotificationKind;
  channel: string;
  recipient: string;
  /** 1 for the first attempt. */
  attempt: number;
  outcome: "sent" | "failed" | "given_up";
  error?: string;
  /** When a failed attempt is retried. */
  retryAt?: Date;
  at: Date;
}

const OUTCOME_EVENT: Record<DeliveryAttempt["outcome"], EventKind> = {
  sent: "delivered",
  failed: "delivery_failed",
  given_up: "delivery_given_up",
};

/**
 * Appends a delivery attempt's outcome to its incident's timeline (`delivered`,
 * `delivery_failed`, `delivery_given_up`), in the caller's transaction with the notification's
 * own mark; the incident row is locked first, as every change does. Nothing when the incident is gone.
 */
export async function recordDelivery(tx: Queryable, d: DeliveryAttempt): Promise<void> {
  if (!(await lockIncident(tx, d.incidentId))) return;
  await appendEvent(tx, d.incidentId, d.at, OUTCOME_EVENT[d.outcome], {
    notification_id: d.notificationId,
    kind: d.kind,
    channel: d.channel,
    recipient: d.recipient,
    attempt: d.attempt,
    ...(d.error !== undefined ? { error: d.error } : {}),
    ...(d.retryAt ? { retry_at: d.retryAt.toISOString() } : {}),
  });
}

/** Withholds the incident's deferred e-mails, recording that in its timeline. */
async function withhold(tx: Queryable, incidentId: string, at: Date, reason: string): Promise<void> {
  const withheld = await suppressDeferred(tx, incidentId, at, `suppressed: ${reason}`);
  const kinds = [...new Set(withheld.map((w) => w.kind))];
  for (const kind of kinds)
    await appendEvent(tx, incidentId, at, "suppressed", {
      kind,
      notification_ids: withheld.filter((w) => w.kind === kind).map((w) => w.id),
      reason,
    });
}

/**
 * Queues the e-mail to everyone told about the connection, and records that in the timeline. A
 * failure e-mail within the noise-control interval of the connection's last one is due at the
 * interval's end instead of at once (`deferred_until` in the event).
 */
async function notify(
  tx: Queryable,
  target: IncidentTarget,
  incidentId: string,
  at: Date,
  mail: MailText,
  intervalSeconds = DEFAULT_FAILURE_MAIL_INTERVAL_SECONDS,
  anomalyId?: string | null,
): Promise<void> {
  let dueAt = at;
  if (mail.kind === "failure" && intervalSeconds > 0) {
    const last = await lastFailureMailDue(tx, target.connectionId);
    const next = last ? last.getTime() + intervalSeconds * 1000 : 0;
    if (next > at.getTime()) dueAt = new Date(next);
  }
  const to = await recipients(tx, target);
  const rows = await enqueueRouted(tx, {
    kind: mail.kind,
    account: target,
    connectionId: target.connectionId,
    incidentId,
    anomalyId: anomalyId ?? null,
    recipients: to,
    subject: mail.subject,
    body: mail.body,
    at,
    dueAt,
    ...(mail.event ? { pagingEvent: mail.event } : {}),
  });
  const owners = rows.filter((r) => r.channel === "email" && r.channelId === null).length;
  await appendEvent(tx, incidentId, at, "notified", {
    kind: mail.kind,
    // how each row goes out: e-mail, webhook, or a channel type (enqueueRouted)
    channels: [...new Set(rows.map((r) => r.channel))],
    recipients: owners,
    webhooks: rows.filter((r) => r.channel === "webhook" && r.channelId === null).length,
    channel_ids: [...new Set(rows.flatMap((r) => (r.channelId ? [r.channelId] : [])))],
    notification_ids: rows.map((r) => r.id),
    ...(dueAt > at
      ? {
          deferred_until: dueAt.toISOString(),
          reason: `at most one failure e-mail per connection every ${intervalSeconds} s`,
        }
      : {}),
  });
}
