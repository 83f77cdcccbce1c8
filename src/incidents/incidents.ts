/**
 * The incidents domain: every detector (availability checks, missed heartbeats, anomalies,
 * budgets) opens and resolves incidents through these functions, in the caller's transaction.
 *
 * Invariants:
 * - at most one unresolved incident per connection and kind (a partial unique index);
 * - the lifecycle is open -> acknowledged -> resolved (resolve also from open);
 * - every change writes its timeline event, and the e-mails it causes (the notifications
 *   outbox), in the same transaction: an incident never changes without its event, and an
 *   e-mail is never decided twice;
 * - a change locks the incident row before appending events, so a timeline reads back in
 *   causal order by its sequence column.
 */

import { conflict, notFound } from "../core/errors.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  appendEvent,
  enqueueNotifications,
  type IncidentKind,
  incidentStatus,
  insertOpenIncident,
  markAcknowledged,
  markResolved,
  recipients,
} from "./repository.js";
import { type IncidentTarget, type MailText, openingMail, recoveryMail } from "./templates.js";

export type { IncidentKind, IncidentStatus } from "./repository.js";
export type { IncidentTarget, MailText } from "./templates.js";

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
}

/**
 * Opens an incident of `kind` for the connection unless one is unresolved already, with its
 * `opened` event and failure e-mails. Returns the new incident's id, or null when one was open.
 */
export async function openIncident(
  tx: Queryable,
  target: IncidentTarget,
  o: OpenIncident,
): Promise<string | null> {
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
  await notify(tx, target, id, o.at, mail);
  return id;
}

export interface ResolveIncident {
  kind: IncidentKind;
  /** The `resolved` event's detail. */
  detail: Record<string, unknown>;
  at: Date;
  publicUrl: string;
  /** Set by a detector that saw the cause go away; false for a person's resolution (a later issue). */
  automatic?: boolean;
  mail?: MailText;
}

/**
 * Resolves the connection's unresolved incident of `kind` (open or acknowledged), if any, with
 * its `resolved` event and recovery e-mails. Returns its id, or null when none was unresolved.
 */
export async function resolveIncident(
  tx: Queryable,
  target: IncidentTarget,
  r: ResolveIncident,
): Promise<string | null> {
  const row = await markResolved(tx, target.connectionId, r.kind, r.at);
  if (!row) return null;
  await appendEvent(tx, row.id, r.at, "resolved", { ...r.detail, automatic: r.automatic ?? true });
  const mail =
    r.mail ??
    recoveryMail(r.kind, {
      target,
      detail: r.detail,
      at: r.at,
      openedAt: new Date(row.opened_at),
      publicUrl: r.publicUrl,
    });
  await notify(tx, target, row.id, r.at, mail);
  return row.id;
}

export interface AcknowledgeIncident {
  incidentId: string;
  /** Who acknowledged (a user or key id), recorded in the event. */
  by: string;
  note?: string | null;
  at: Date;
}

/**
 * Moves an open incident to acknowledged, with its `acknowledged` event; no e-mail. Throws
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
  return { id: a.incidentId, status: "acknowledged" };
}

/** Queues the e-mail to everyone told about the connection, and records that in the timeline. */
async function notify(
  tx: Queryable,
  target: IncidentTarget,
  incidentId: string,
  at: Date,
  mail: MailText,
): Promise<void> {
  const to = await recipients(tx, target);
  await enqueueNotifications(tx, {
    connectionId: target.connectionId,
    incidentId,
    kind: mail.kind,
    recipients: to,
    subject: mail.subject,
    body: mail.body,
    at,
  });
  await appendEvent(tx, incidentId, at, "notified", { kind: mail.kind, recipients: to.length });
}
