import type { Actor, Role } from "../core/actor.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  type Account,
  type AuditEvent,
  enqueueNotifications,
  keyFacts,
  type KeyFacts,
  organizationName,
  recipients,
  userEmail,
} from "./repository.js";

/**
 * Audit notifications: the security-relevant account events (an API key created or revoked, a
 * connection's credentials changed, a connection deleted, an organization's membership changed),
 * each one `audit` row per recipient in the outbox, so it is e-mailed like any alert and listed in
 * the alert history. Written in the transaction of the change it reports. Who is told: the user of
 * a personal account; the owners and admins of an organization. No secret is ever written: a key
 * is named by its id and first characters, a credential by its field name.
 */

/** Who did it, in words, for the e-mail: `API key 5f… of user 9a…`, or the admin command. */
export type AuditActor =
  { type: "api_key"; keyId: string; userId: string } | { type: "user"; userId: string } | { type: "admin" };

/** The audit's wording of a caller. */
export function auditActorOf(actor: Actor): AuditActor {
  switch (actor.type) {
    case "api_key":
    case "ingestion_key":
      return { type: "api_key", keyId: actor.keyId, userId: actor.userId };
    case "user":
      return { type: "user", userId: actor.userId };
    case "system":
      return { type: "admin" };
  }
}

const byWhom = (a: AuditActor) =>
  a.type === "api_key"
    ? `API key ${a.keyId} (user ${a.userId})`
    : a.type === "user"
      ? `user ${a.userId}`
      : "an administrator (vigil admin)";

interface Audit {
  event: AuditEvent;
  account: Account;
  connectionId?: string | null;
  subject: string;
  /** The body's facts; a closing line is added. */
  lines: string[];
  at: Date;
}

async function record(tx: Queryable, a: Audit): Promise<string[]> {
  const to = await recipients(tx, a.account);
  return enqueueNotifications(tx, {
    kind: "audit",
    auditEvent: a.event,
    account: a.account,
    connectionId: a.connectionId ?? null,
    recipients: to,
    subject: a.subject,
    body: `${a.lines.join("\n")}\nWhen: ${a.at.toISOString()}\n\nIf you did not expect this, check your account's API keys and connections.\n`,
    at: a.at,
  });
}

/** The account a key belongs to: its organization's, its gateway connection's, or its user's. */
function keyAccount(k: KeyFacts): Account {
  if (k.kind === "usage_ingestion" && k.connection_user_id)
    return { userId: k.connection_user_id, organizationId: k.connection_organization_id };
  return { userId: k.user_id, organizationId: k.organization_id };
}

function describeKey(k: KeyFacts): string {
  const what =
    k.kind === "organization"
      ? "organization"
      : k.kind === "usage_ingestion"
        ? "usage-ingestion"
        : "personal";
  const name = k.name ? ` "${k.name}"` : "";
  const gateway = k.connection_id ? ` for the gateway "${k.connection_name ?? k.connection_id}"` : "";
  return `${what === "organization" ? "An" : "A"} ${what} API key${name}${gateway} (id ${k.id}, starting ${k.display_prefix}…) of ${k.email}`;
}

/** An API key was created: names it (never the key), its owner and its permissions. */
export async function auditKeyCreated(tx: Queryable, keyId: string, at: Date, by: AuditActor) {
  const k = await keyFacts(tx, keyId);
  if (!k) return [];
  return record(tx, {
    event: "api_key_created",
    account: keyAccount(k),
    connectionId: k.connection_id,
    subject: "[Vigil] An API key was created",
    lines: [
      `${describeKey(k)} was created by ${byWhom(by)}.`,
      `Permissions: ${k.permissions.join(", ") || "none"}.`,
    ],
    at,
  });
}

/** An API key is being revoked: call before the revocation, in its transaction; nothing for one revoked already. */
export async function auditKeyRevoked(tx: Queryable, keyId: string, at: Date, by: AuditActor) {
  const k = await keyFacts(tx, keyId);
  if (!k || k.revoked_at) return [];
  return record(tx, {
    event: "api_key_revoked",
    account: keyAccount(k),
    connectionId: k.connection_id,
    subject: "[Vigil] An API key was revoked",
    lines: [`${describeKey(k)} was revoked by ${byWhom(by)}; it no longer works.`],
    at,
  });
}

/** Credentials of a connection changed: names the fields (`api_key`, `api_token`), never their values. */
export async function auditCredentialsChanged(
  tx: Queryable,
  c: { connectionId: string; name: string; account: Account; fields: string[]; at: Date; by: AuditActor },
) {
  return record(tx, {
    event: "connection_credentials_changed",
    account: c.account,
    connectionId: c.connectionId,
    subject: `[Vigil] Credentials changed on ${c.name}`,
    lines: [
      `The ${c.fields.join(" and ")} of the connection "${c.name}" (${c.connectionId}) changed, by ${byWhom(c.by)}.`,
      "The new value is stored encrypted and is not shown.",
    ],
    at: c.at,
  });
}

/**
 * A connection is being deleted: call before the delete, in its transaction. The row names the
 * connection (its id becomes NULL with the delete; the subject and text keep its name).
 */
export async function auditConnectionDeleted(
  tx: Queryable,
  c: { connectionId: string; name: string; serviceType: string; account: Account; at: Date; by: AuditActor },
) {
  return record(tx, {
    event: "connection_deleted",
    account: c.account,
    connectionId: c.connectionId,
    subject: `[Vigil] Connection deleted: ${c.name}`,
    lines: [
      `The ${c.serviceType} connection "${c.name}" (${c.connectionId}) was deleted by ${byWhom(c.by)}.`,
      "Its monitoring stopped and its ingestion key, if any, no longer works.",
    ],
    at: c.at,
  });
}

/** A user's role in an organization changed (or the user joined it). */
export async function auditMembershipChanged(
  tx: Queryable,
  m: { organizationId: string; userId: string; from: Role | null; to: Role; at: Date; by: AuditActor },
) {
  const org = (await organizationName(tx, m.organizationId)) ?? m.organizationId;
  const email = (await userEmail(tx, m.userId)) ?? m.userId;
  return record(tx, {
    event: "membership_changed",
    account: { userId: m.userId, organizationId: m.organizationId },
    subject: `[Vigil] Membership changed in ${org}`,
    lines: [
      m.from
        ? `${email} is now ${m.to} of the organization "${org}" (was ${m.from}), by ${byWhom(m.by)}.`
        : `${email} joined the organization "${org}" as ${m.to}, by ${byWhom(m.by)}.`,
    ],
    at: m.at,
  });
}

/**
 * A user left an organization or was removed from it (audit event `membership_changed`): told to
 * its owners and admins, and to the person who is no longer a member.
 */
export async function auditMemberRemoved(
  tx: Queryable,
  m: { organizationId: string; userId: string; role: Role; left: boolean; at: Date; by: AuditActor },
) {
  const org = (await organizationName(tx, m.organizationId)) ?? m.organizationId;
  const email = (await userEmail(tx, m.userId)) ?? m.userId;
  const to = await recipients(tx, { userId: m.userId, organizationId: m.organizationId });
  return enqueueNotifications(tx, {
    kind: "audit",
    auditEvent: "membership_changed",
    account: { userId: m.userId, organizationId: m.organizationId },
    connectionId: null,
    recipients: [...new Set([...to, email])],
    subject: `[Vigil] Membership changed in ${org}`,
    body: `${
      m.left
        ? `${email} left the organization "${org}" (was ${m.role}).`
        : `${email} was removed from the organization "${org}" (was ${m.role}), by ${byWhom(m.by)}.`
    }\nWhen: ${m.at.toISOString()}\n\nIf you did not expect this, check your account's API keys and connections.\n`,
    at: m.at,
  });
}

/**
 * An organization was renamed (audit event `organization_renamed`; the lead adds it to
 * `AuditEvent` and the REST response schema).
 */
export async function auditOrganizationRenamed(
  tx: Queryable,
  o: { organizationId: string; from: string; to: string; at: Date; by: AuditActor },
) {
  return record(tx, {
    event: "organization_renamed",
    account: { userId: "", organizationId: o.organizationId },
    subject: `[Vigil] Organization renamed: ${o.to}`,
    lines: [
      `The organization "${o.from}" (${o.organizationId}) is now called "${o.to}", by ${byWhom(o.by)}.`,
    ],
    at: o.at,
  });
}
