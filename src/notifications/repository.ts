import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { Position } from "../core/page.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";
import { webhookTargets } from "../webhooks/repository.js";
import { type ChannelRow, insertEscalation } from "../channels/repository.js";
import { routeAlert } from "../channels/routing.js";
import type { AlertEvent, ChannelType } from "../channels/providers/types.js";
import type { AlertAccount } from "./account.js";
import { underMaintenance } from "../maintenance/repository.js";

/**
 * The notifications outbox (sql/postgres/004_probes.sql, 012_incident_lifecycle.sql,
 * 016_webhooks.sql), which is also the alert history: one row per notification Vigil decided to
 * send and recipient (an e-mail address, or one of the account's webhooks). Rows are written in
 * the transaction of the change that causes them (an incident's change, an audited account
 * event); delivery claims, sends and marks them (delivery.ts for e-mail, webhooks/delivery.ts).
 */

export type NotificationKind =
  | "failure"
  | "recovery"
  | "audit"
  | "budget_warning"
  | "anomaly"
  | "invitation"
  | "acknowledged"
  | "escalation"
  | "slo_burn";
export const NOTIFICATION_KINDS = [
  "failure",
  "recovery",
  "audit",
  "budget_warning",
  "anomaly",
  "invitation",
  "acknowledged",
  "escalation",
  "slo_burn",
] as const;
/** How a row goes out: e-mail, a signed webhook, or a channel type of /v1/channels. */
export type Channel = ChannelType;
/** `suppressed`: withheld by noise control before its first attempt; never sent. */
export type DeliveryStatus = "pending" | "sent" | "failed" | "suppressed";
export type AuditEvent =
  | "api_key_created"
  | "api_key_revoked"
  | "connection_credentials_changed"
  | "connection_deleted"
  | "membership_changed"
  | "organization_renamed";

/** An account: a personal one (organizationId null) or an organization's. */
export interface Account {
  userId: string;
  organizationId: string | null;
}

// --- writing: who is told, and the outbox rows ---

/** Who is told: the owner of a personal account; the owners and admins of an organization. */
export async function recipients(tx: Queryable, c: Account): Promise<string[]> {
  const r = c.organizationId
    ? await tx.query<{ email: string }>(
        `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.organization_id = $1 AND m.role IN ('owner', 'admin') ORDER BY u.email`,
        [c.organizationId],
      )
    : await tx.query<{ email: string }>("SELECT email FROM users WHERE id = $1", [c.userId]);
  return r.rows.map((row) => row.email);
}

export interface NewNotifications {
  kind: NotificationKind;
  /** The account the alert belongs to: who may read it in the alert history. */
  account?: Account;
  connectionId?: string | null;
  incidentId?: string | null;
  anomalyId?: string | null;
  auditEvent?: AuditEvent | null;
  /** The channel of `recipients`: e-mail unless said otherwise. */
  channel?: Channel;
  /** E-mail addresses (the account's owners and admins); may be empty. */
  recipients: readonly string[];
  subject: string;
  body: string;
  at: Date;
  /** When the first attempt is due; `at` unless noise control deferred it. */
  dueAt?: Date;
  /** Also one `webhook` row per webhook of the account (the default); false: the recipients only. */
  webhooks?: boolean;
  /** `info`: paging channels get a plain message, not a trigger (src/channels/routing.ts). */
  pagingEvent?: "info";
}

/** One row written to the outbox, as the incident's `notified` event counts them. */
export interface QueuedNotification {
  id: string;
  channel: Channel;
  /** The channel of /v1/channels it goes to; null for the owners' e-mail and /v1/webhooks. */
  channelId: string | null;
}

/**
 * Queues the notification in the outbox: one row per recipient (the account's owners' e-mail,
 * unless the account turned it off), one `webhook` row per webhook of /v1/webhooks of the account
 * (its own, or else the connection's), and one row per channel routing picks
 * (src/channels/routing.ts; an e-mail channel: one per address), all with the same text, kind,
 * incident and due time, so noise control (deferral, suppression) treats them alike. Starts the
 * escalations of the rules that matched an incident's opening alert. Returns every row.
 */
export async function enqueueRouted(tx: Queryable, n: NewNotifications): Promise<QueuedNotification[]> {
  const rows: QueuedNotification[] = [];
  // a connection under maintenance (docs/maintenance.md): nothing new is sent about it; what ends
  // an alert already sent (a recovery, an acknowledgement) still goes, so no pager stays triggered
  if (
    n.connectionId &&
    SILENCED_IN_MAINTENANCE.has(n.kind) &&
    (await underMaintenance(tx, n.connectionId, n.at))
  )
    return rows;
  const account = n.account ?? (n.connectionId ? await connectionAccount(tx, n.connectionId) : null);
  const alertAccount = account ? accountRef(account) : null;
  const plan =
    alertAccount && n.webhooks !== false
      ? await routeAlert(tx, alertAccount, {
          kind: n.kind,
          connectionId: n.connectionId ?? null,
          incidentId: n.incidentId ?? null,
          ...(n.pagingEvent ? { event: n.pagingEvent } : {}),
        })
      : null;
  const owners = plan && !plan.emailOwners ? [] : n.recipients;
  for (const recipient of owners) rows.push(await insertRow(tx, n, n.channel ?? "email", recipient, {}));
  if (alertAccount && n.webhooks !== false)
    for (const w of await webhookTargets(tx, alertAccount))
      // the recipient is the URL's origin: the whole URL may hold a secret
      rows.push(await insertRow(tx, n, "webhook", w.url_origin, { webhookId: w.id }));
  for (const { channel, event } of plan?.channels ?? [])
    rows.push(...(await queueToChannel(tx, n, channel, event)));
  if (n.incidentId)
    for (const rule of plan?.escalations ?? [])
      await insertEscalation(tx, {
        incidentId: n.incidentId,
        ruleId: rule.id,
        nextAt: new Date(n.at.getTime() + (rule.escalate_after_minutes ?? 0) * 60_000),
      });
  return rows;
}

/** What a maintenance window silences: budget warnings are about money, not planned work. */
const SILENCED_IN_MAINTENANCE = new Set<NotificationKind>(["failure", "anomaly", "escalation", "slo_burn"]);

const accountRef = (a: Account): AlertAccount =>
  a.organizationId ? { scope: "organization", id: a.organizationId } : { scope: "user", id: a.userId };

async function insertRow(
  tx: Queryable,
  n: Omit<NewNotifications, "recipients">,
  channel: Channel,
  recipient: string,
  target: { webhookId?: string; channelId?: string; event?: AlertEvent },
): Promise<QueuedNotification> {
  const id = randomUUID();
  await tx.query(
    `INSERT INTO notifications (id, connection_id, incident_id, anomaly_id, kind, channel, recipient, subject, body,
                                created_at, next_attempt_at, due_at, user_id, organization_id, audit_event, webhook_id,
                                channel_id, event)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14, $15, $16, $17)`,
    [
      id,
      n.connectionId ?? null,
      n.incidentId ?? null,
      n.anomalyId ?? null,
      n.kind,
      channel,
      recipient,
      n.subject,
      n.body,
      n.at.toISOString(),
      (n.dueAt ?? n.at).toISOString(),
      // rows of callers that name no account keep both NULL: the connection's account (as before)
      n.account && !n.account.organizationId ? n.account.userId : null,
      n.account?.organizationId ?? null,
      n.auditEvent ?? null,
      target.webhookId ?? null,
      target.channelId ?? null,
      target.event ?? null,
    ],
  );
  return { id, channel, channelId: target.channelId ?? null };
}

/** The rows of one channel: one per address of an e-mail channel, one otherwise. */
async function queueToChannel(
  tx: Queryable,
  n: Omit<NewNotifications, "recipients">,
  channel: ChannelRow,
  event: AlertEvent,
): Promise<QueuedNotification[]> {
  if (channel.type === "email") {
    const addresses = Array.isArray(channel.settings.addresses)
      ? (channel.settings.addresses as string[])
      : [];
    const rows: QueuedNotification[] = [];
    for (const a of addresses)
      rows.push(await insertRow(tx, n, "email", a, { channelId: channel.id, event }));
    return rows;
  }
  return [await insertRow(tx, n, channel.type, channel.hint, { channelId: channel.id, event })];
}

/**
 * Queues one alert to the given channels only (no owners' e-mail, no /v1/webhooks): a paging
 * provider's acknowledgement, an escalation. Returns the rows.
 */
export async function enqueueToChannels(
  tx: Queryable,
  n: Omit<NewNotifications, "recipients" | "webhooks"> & { channels: ChannelRow[]; event: AlertEvent },
): Promise<QueuedNotification[]> {
  const rows: QueuedNotification[] = [];
  for (const channel of n.channels) rows.push(...(await queueToChannel(tx, n, channel, n.event)));
  return rows;
}

/** Queues the notification (see `enqueueRouted`); returns every row's id. */
export async function enqueueNotifications(tx: Queryable, n: NewNotifications): Promise<string[]> {
  return (await enqueueRouted(tx, n)).map((r) => r.id);
}

/** A connection's account; null when it is gone. */
async function connectionAccount(tx: Queryable, connectionId: string): Promise<Account | null> {
  const r = await tx.query<{ user_id: string; organization_id: string | null }>(
    "SELECT user_id, organization_id FROM connections WHERE id = $1",
    [connectionId],
  );
  const c = r.rows[0];
  return c ? { userId: c.user_id, organizationId: c.organization_id } : null;
}

/**
 * When the connection's latest failure e-mail that was not withheld is (or was) due, with the
 * connection row locked, so two transactions deciding failure e-mails for one connection take
 * turns (noise control: at most one per interval). Null when there is none.
 */
export async function lastFailureMailDue(tx: Queryable, connectionId: string): Promise<Date | null> {
  await tx.query("SELECT 1 FROM connections WHERE id = $1 FOR UPDATE", [connectionId]);
  const r = await tx.query<{ due: Date | null }>(
    `SELECT max(coalesce(due_at, created_at)) AS due FROM notifications
      WHERE connection_id = $1 AND kind = 'failure' AND status <> 'suppressed'`,
    [connectionId],
  );
  const due = r.rows[0]?.due;
  return due ? new Date(due) : null;
}

/**
 * Withholds the incident's notifications that wait for a later due time than `at` and were never
 * attempted (deferred by noise control): status `suppressed`. Returns what was withheld.
 */
export async function suppressDeferred(
  tx: Queryable,
  incidentId: string,
  at: Date,
  reason: string,
): Promise<{ id: string; kind: NotificationKind }[]> {
  const r = await tx.query<{ id: string; kind: NotificationKind }>(
    `UPDATE notifications SET status = 'suppressed', last_error = $3
      WHERE incident_id = $1 AND status = 'pending' AND attempts = 0 AND coalesce(due_at, created_at) > $2
      RETURNING id, kind`,
    [incidentId, at.toISOString(), reason],
  );
  return r.rows;
}

/** How many of the incident's notifications were withheld, and how many were not. */
export async function incidentNotificationCounts(
  tx: Queryable,
  incidentId: string,
): Promise<{ suppressed: number; other: number }> {
  const r = await tx.query<{ suppressed: number | string; other: number | string }>(
    `SELECT count(*) FILTER (WHERE status = 'suppressed') AS suppressed,
            count(*) FILTER (WHERE status <> 'suppressed') AS other
       FROM notifications WHERE incident_id = $1`,
    [incidentId],
  );
  return { suppressed: Number(r.rows[0]?.suppressed ?? 0), other: Number(r.rows[0]?.other ?? 0) };
}

// --- delivery ---

/** A claimed notification: what its channel's sender needs, and what the timeline records. */
export interface PendingNotification extends Record<string, unknown> {
  id: string;
  recipient: string;
  subject: string;
  body: string;
  /** Counting the attempt just claimed: 1 for the first. */
  attempts: number;
  kind: NotificationKind;
  channel: Channel;
  incident_id: string | null;
  connection_id: string | null;
  anomaly_id: string | null;
  audit_event: string | null;
  webhook_id: string | null;
  channel_id: string | null;
  /** What a paging provider does with it (trigger, acknowledge, resolve, info); null for older rows. */
  event: AlertEvent | null;
  created_at: Date;
}
/** A claimed e-mail. */
export type PendingMail = PendingNotification;

const PENDING_COLUMNS =
  "id, recipient, subject, body, attempts, kind, channel, incident_id, connection_id, anomaly_id, audit_event, webhook_id, channel_id, event, created_at";

/**
 * Claims up to `batch` notifications of `channel` due at `at`: counts the attempt and pushes the
 * next one to `claimUntil`, skipping rows another node is claiming (FOR UPDATE SKIP LOCKED).
 */
export async function claimDue(
  db: Queryable,
  c: { channel: Channel | readonly Channel[]; batch: number; at: Date; claimUntil: Date },
): Promise<PendingNotification[]> {
  const channels = typeof c.channel === "string" ? [c.channel] : [...c.channel];
  // returned in the order they became due, so a failure alert goes before its recovery
  const r = await db.query<PendingNotification>(
    `WITH claimed AS (
       UPDATE notifications SET attempts = attempts + 1, next_attempt_at = $3
        WHERE id IN (SELECT id FROM notifications
                      WHERE status = 'pending' AND channel = ANY($4::text[]) AND next_attempt_at <= $2
                      ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING ${PENDING_COLUMNS}, coalesce(due_at, created_at) AS due
     )
     SELECT ${PENDING_COLUMNS} FROM claimed ORDER BY due, created_at, id`,
    [c.batch, c.at.toISOString(), c.claimUntil.toISOString(), channels],
  );
  return r.rows;
}

/** Claims due e-mails (see `claimDue`). */
export const claimDueMail = (db: Queryable, c: { batch: number; at: Date; claimUntil: Date }) =>
  claimDue(db, { ...c, channel: "email" });

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

/**
 * Hands claimed notifications back unattempted (a provider's rate limit held up their queue):
 * the attempt counted by the claim is taken back, and they are due again at `at`.
 */
export async function releaseClaims(db: Queryable, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await db.query(
    `UPDATE notifications SET attempts = greatest(attempts - 1, 0), next_attempt_at = $2
      WHERE id = ANY($1::text[]) AND status = 'pending'`,
    [[...ids], at.toISOString()],
  );
}

/** Notes `reason` on pending e-mails not noted yet; returns those, so each is logged once. */
export async function noteUnsendable(db: Queryable, reason: string): Promise<PendingMail[]> {
  const r = await db.query<PendingMail>(
    `UPDATE notifications SET last_error = $1
      WHERE status = 'pending' AND channel = 'email' AND last_error IS NULL
      RETURNING ${PENDING_COLUMNS}`,
    [reason],
  );
  return r.rows;
}

/** The connection names of claimed notifications (for a webhook's payload). */
export async function connectionNames(db: Queryable, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const r = await db.query<{ id: string; service_name: string }>(
    "SELECT id, service_name FROM connections WHERE id = ANY($1::text[])",
    [ids],
  );
  return new Map(r.rows.map((row) => [row.id, row.service_name]));
}

// --- reading: the alert history ---

/**
 * The SQL that makes a notification's account (its own, or its connection's for rows written
 * before accounts were recorded) look like a connection to the visibility rule: `a.id`,
 * `a.user_id`, `a.organization_id`. An alert is visible to whoever may see the connections of its
 * account (an ingestion key: those of its one connection).
 */
const ALERT_ACCOUNT = `
  LEFT JOIN connections c ON c.id = n.connection_id
  CROSS JOIN LATERAL (
    SELECT n.connection_id AS id,
           CASE WHEN n.user_id IS NULL AND n.organization_id IS NULL THEN c.user_id ELSE n.user_id END AS user_id,
           CASE WHEN n.user_id IS NULL AND n.organization_id IS NULL THEN c.organization_id ELSE n.organization_id END AS organization_id
  ) a`;

/** One notification of the alert history. */
export interface AlertRecordRow extends Record<string, unknown> {
  id: string;
  kind: NotificationKind;
  channel: Channel;
  recipient: string;
  subject: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  due_at: Date | null;
  sent_at: Date | null;
  connection_id: string | null;
  connection_name: string | null;
  incident_id: string | null;
  anomaly_id: string | null;
  audit_event: string | null;
  organization_id: string | null;
  webhook_id: string | null;
  channel_id: string | null;
}

/**
 * One newest-first keyset page of the alert history the actor may see, ordered by
 * (created_at, id); `limit + 1` rows are read so the caller knows whether more follow.
 */
export async function selectAlertPage(
  db: Queryable,
  actor: Actor,
  q: {
    connectionId?: string;
    kind?: NotificationKind;
    since?: Date;
    until?: Date;
    limit: number;
    after?: Position;
  },
): Promise<AlertRecordRow[]> {
  const params: unknown[] = [
    q.connectionId ?? null,
    q.kind ?? null,
    q.since?.toISOString() ?? null,
    q.until?.toISOString() ?? null,
    q.after?.ts.toISOString() ?? null,
    q.after?.key[0] ?? "",
    q.limit + 1,
  ];
  const visible = visibleConnectionsCondition(actor, (v) => `$${params.push(v)}`, "a");
  const r = await db.query<AlertRecordRow>(
    `SELECT n.id, n.kind, n.channel, n.recipient, n.subject, n.body, n.status, n.attempts, n.last_error,
            n.created_at, n.due_at, n.sent_at, n.connection_id, c.service_name AS connection_name,
            n.incident_id, n.anomaly_id, n.audit_event, a.organization_id, n.webhook_id, n.channel_id
       FROM notifications n ${ALERT_ACCOUNT}
      WHERE ${visible}
        AND ($1::text IS NULL OR n.connection_id = $1)
        AND ($2::text IS NULL OR n.kind = $2)
        AND ($3::timestamptz IS NULL OR n.created_at >= $3)
        AND ($4::timestamptz IS NULL OR n.created_at < $4)
        AND ($5::timestamptz IS NULL OR (n.created_at, n.id) < ($5, $6::text))
      ORDER BY n.created_at DESC, n.id DESC LIMIT $7`,
    params,
  );
  return r.rows;
}

/** One alert as sent: the outbox rows of one alert to its recipients (e-mail addresses and webhooks), grouped. */
export interface AlertRow extends Record<string, unknown> {
  id: string;
  kind: string;
  /** Null for an account audit, or once the connection was deleted. */
  connection_id: string | null;
  connection_name: string | null;
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
 * The newest `limit` alerts about the connections the actor may see (failures, recoveries,
 * audits of a connection, budget warnings, anomalies), newest first: what the MCP tool
 * get_alert_history reads. The outbox holds one row per recipient (an e-mail address or a
 * webhook); an alert is those rows of one text (same connection, incident, kind, text and time),
 * with its recipients and their delivery states counted. Recipients are not returned.
 */
export async function selectAlertHistory(
  db: Queryable,
  actor: Actor,
  q: { limit: number },
): Promise<AlertRow[]> {
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  // The same account visibility as GET /v1/alerts: audits of the account, and alerts of deleted
  // connections, are in the history too.
  const visible = visibleConnectionsCondition(actor, param, "a");
  const r = await db.query<AlertRow>(
    `SELECT min(n.id) AS id, n.kind, n.connection_id, c.service_name AS connection_name,
            n.incident_id, i.kind AS incident_kind, i.status AS incident_status,
            n.subject, n.body, n.created_at,
            count(*) AS recipients,
            count(*) FILTER (WHERE n.status = 'sent') AS sent,
            count(*) FILTER (WHERE n.status = 'pending') AS pending,
            count(*) FILTER (WHERE n.status = 'failed') AS failed
       FROM notifications n ${ALERT_ACCOUNT}
       LEFT JOIN incidents i ON i.id = n.incident_id
      WHERE ${visible}
      GROUP BY n.kind, n.connection_id, c.service_name, n.incident_id, i.kind, i.status, n.subject, n.body, n.created_at
      ORDER BY n.created_at DESC, min(n.id) DESC
      LIMIT ${param(q.limit)}`,
    params,
  );
  return r.rows;
}

// --- facts the audit notifications name (read in the transaction of the audited change) ---

export async function userEmail(tx: Queryable, userId: string): Promise<string | null> {
  const r = await tx.query<{ email: string }>("SELECT email FROM users WHERE id = $1", [userId]);
  return r.rows[0]?.email ?? null;
}

export async function organizationName(tx: Queryable, organizationId: string): Promise<string | null> {
  const r = await tx.query<{ name: string }>("SELECT name FROM organizations WHERE id = $1", [
    organizationId,
  ]);
  return r.rows[0]?.name ?? null;
}

/** An API key as its audit names it, with the account it belongs to (locked for the change). */
export interface KeyFacts extends Record<string, unknown> {
  id: string;
  kind: "personal" | "organization" | "usage_ingestion";
  user_id: string;
  email: string;
  organization_id: string | null;
  connection_id: string | null;
  connection_name: string | null;
  connection_user_id: string | null;
  connection_organization_id: string | null;
  name: string | null;
  display_prefix: string;
  permissions: string[];
  revoked_at: Date | null;
}

export async function keyFacts(tx: Queryable, keyId: string): Promise<KeyFacts | null> {
  const r = await tx.query<KeyFacts>(
    `SELECT k.id, k.kind, k.user_id, u.email, k.organization_id, k.connection_id,
            c.service_name AS connection_name, c.user_id AS connection_user_id,
            c.organization_id AS connection_organization_id,
            k.name, k.display_prefix, k.permissions, k.revoked_at
       FROM api_keys k JOIN users u ON u.id = k.user_id
       LEFT JOIN connections c ON c.id = k.connection_id
      WHERE k.id = $1
      FOR UPDATE OF k`,
    [keyId],
  );
  return r.rows[0] ?? null;
}

/** Notifications waiting to be sent (due or retrying), per channel: the outbox depth of /metrics. */
export async function pendingByChannel(db: Queryable): Promise<{ channel: string; rows: number }[]> {
  const { rows } = await db.query<{ channel: string; rows: number }>(
    `SELECT channel, count(*)::int AS rows FROM notifications WHERE status = 'pending' GROUP BY channel`,
  );
  return rows;
}
