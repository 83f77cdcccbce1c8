import type { Role } from "../core/actor.js";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import type { Plan } from "./plans.js";

/**
 * Statements of the organization rules (organizations.ts), the invitations (invitations.ts) and
 * the people's own account (profile.ts): organizations with their members, the `invitations`
 * table (sql/postgres/018_invitations.sql), the first-run lock and passwords. Each function takes
 * a `Queryable`: the store, or a transaction the caller holds open.
 */

// --- organizations and their members ---

export interface MyOrganizationRow extends Record<string, unknown> {
  id: string;
  name: string;
  plan: Plan;
  role: Role;
  members: number | string;
  created_at: Date;
}

/** The organizations the user belongs to, with the user's role and the member count, by name. */
export async function organizationsOfUser(db: Queryable, userId: string): Promise<MyOrganizationRow[]> {
  const r = await db.query<MyOrganizationRow>(
    `SELECT o.id, o.name, o.plan, m.role, o.created_at,
            (SELECT count(*) FROM memberships x WHERE x.organization_id = o.id) AS members
       FROM memberships m JOIN organizations o ON o.id = m.organization_id
      WHERE m.user_id = $1
      ORDER BY lower(o.name), o.id`,
    [userId],
  );
  return r.rows;
}

export interface OrganizationRow extends Record<string, unknown> {
  id: string;
  name: string;
  plan: Plan;
  created_at: Date;
}

/** An organization, locked for the change when `lock` (membership changes take turns per organization). */
export async function organizationRow(
  db: Queryable,
  id: string,
  lock = false,
): Promise<OrganizationRow | undefined> {
  const r = await db.query<OrganizationRow>(
    `SELECT id, name, plan, created_at FROM organizations WHERE id = $1${lock ? " FOR UPDATE" : ""}`,
    [id],
  );
  return r.rows[0];
}

export interface MemberRow extends Record<string, unknown> {
  user_id: string;
  email: string;
  role: Role;
  created_at: Date;
}

/** The members of an organization: owners first, then admins, then members, each by e-mail. */
export async function membersOf(db: Queryable, organizationId: string): Promise<MemberRow[]> {
  const r = await db.query<MemberRow>(
    `SELECT m.user_id, u.email, m.role, m.created_at
       FROM memberships m JOIN users u ON u.id = m.user_id
      WHERE m.organization_id = $1
      ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, lower(u.email)`,
    [organizationId],
  );
  return r.rows;
}

export async function ownerCount(db: Queryable, organizationId: string): Promise<number> {
  const r = await db.query<{ n: number | string }>(
    "SELECT count(*) AS n FROM memberships WHERE organization_id = $1 AND role = 'owner'",
    [organizationId],
  );
  return Number(r.rows[0]?.n ?? 0);
}

export async function renameOrganizationRow(db: Queryable, id: string, name: string): Promise<void> {
  await db.query("UPDATE organizations SET name = $2 WHERE id = $1", [id, name]);
}

export async function deleteMembership(
  db: Queryable,
  organizationId: string,
  userId: string,
): Promise<boolean> {
  const r = await db.query("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2", [
    organizationId,
    userId,
  ]);
  return r.rowCount > 0;
}

// --- users: first run, password ---

export interface UserAccountRow extends Record<string, unknown> {
  id: string;
  email: string;
  plan: Plan;
  password_hash: string | null;
  created_at: Date;
}

export async function userAccount(db: Queryable, userId: string): Promise<UserAccountRow | undefined> {
  const r = await db.query<UserAccountRow>(
    "SELECT id, email, plan, password_hash, created_at FROM users WHERE id = $1",
    [userId],
  );
  return r.rows[0];
}

export async function userIdByEmail(db: Queryable, email: string): Promise<string | undefined> {
  const r = await db.query<{ id: string }>("SELECT id FROM users WHERE lower(email) = lower($1)", [email]);
  return r.rows[0]?.id;
}

export async function countUsers(db: Queryable): Promise<number> {
  const r = await db.query<{ n: number | string }>("SELECT count(*) AS n FROM users");
  return Number(r.rows[0]?.n ?? 0);
}

// Any fixed 64-bit number: first-run set-ups take turns on it (transaction-scoped).
const FIRST_RUN_LOCK = 7_310_015_001;

/** Makes concurrent first-run set-ups take turns until the transaction ends. */
export async function lockFirstRun(tx: Queryable): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock($1)", [FIRST_RUN_LOCK]);
}

/** An open transaction seen as a store, so a verb that takes a store (`createUser`) writes in it. */
export const transactionAsStore = (db: RelationalStore, tx: Queryable): RelationalStore => ({
  kind: db.kind,
  query: (text, params) => tx.query(text, params),
  exec: (sql) => tx.exec(sql),
  transaction: (fn) => fn(tx),
  ping: () => db.ping(),
  close: async () => {},
});

export async function setPasswordHash(db: Queryable, userId: string, hash: string): Promise<void> {
  await db.query("UPDATE users SET password_hash = $2 WHERE id = $1", [userId, hash]);
}

/** Ends the user's browser sessions but the one whose id hash is `keep`. */
export async function deleteOtherSessions(
  db: Queryable,
  userId: string,
  keep: string | null,
): Promise<number> {
  const r = await db.query("DELETE FROM web_sessions WHERE user_id = $1 AND id_hash IS DISTINCT FROM $2", [
    userId,
    keep,
  ]);
  return r.rowCount;
}

// --- invitations ---

export interface InvitationRow extends Record<string, unknown> {
  id: string;
  organization_id: string;
  email: string;
  role: Role;
  token_hash: string | null;
  invited_by: string | null;
  invited_by_email: string | null;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by: string | null;
  revoked_at: Date | null;
  notification_id: string | null;
  organization_name: string;
  organization_plan: Plan;
  /** The delivery state of its e-mail: pending, sent, failed; null when it has none. */
  mail_status: string | null;
}

const INVITATION = `
  SELECT i.id, i.organization_id, i.email, i.role, i.token_hash, i.invited_by, u.email AS invited_by_email,
         i.created_at, i.expires_at, i.accepted_at, i.accepted_by, i.revoked_at, i.notification_id,
         o.name AS organization_name, o.plan AS organization_plan, n.status AS mail_status
    FROM invitations i
    JOIN organizations o ON o.id = i.organization_id
    LEFT JOIN users u ON u.id = i.invited_by
    LEFT JOIN notifications n ON n.id = i.notification_id`;

export async function insertInvitation(
  db: Queryable,
  i: {
    id: string;
    organizationId: string;
    email: string;
    role: Role;
    invitedBy: string;
    at: Date;
    expiresAt: Date;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO invitations (id, organization_id, email, role, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [i.id, i.organizationId, i.email, i.role, i.invitedBy, i.at.toISOString(), i.expiresAt.toISOString()],
  );
}

export async function setInvitationNotification(
  db: Queryable,
  id: string,
  notificationId: string,
): Promise<void> {
  await db.query("UPDATE invitations SET notification_id = $2 WHERE id = $1", [id, notificationId]);
}

/** An organization's invitations: pending ones first, then the rest of the last 30 days, newest first. */
export async function invitationsOf(
  db: Queryable,
  organizationId: string,
  at: Date,
): Promise<InvitationRow[]> {
  const r = await db.query<InvitationRow>(
    `${INVITATION}
      WHERE i.organization_id = $1 AND i.created_at > $2::timestamptz - interval '30 days'
      ORDER BY (i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > $2) DESC, i.created_at DESC
      LIMIT 200`,
    [organizationId, at.toISOString()],
  );
  return r.rows;
}

export async function pendingInvitationCount(
  db: Queryable,
  organizationId: string,
  at: Date,
): Promise<number> {
  const r = await db.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM invitations
      WHERE organization_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2`,
    [organizationId, at.toISOString()],
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** Revokes the pending invitations of an address to an organization (a new one replaces them). */
export async function revokePendingFor(
  db: Queryable,
  organizationId: string,
  email: string,
  at: Date,
): Promise<number> {
  const r = await db.query(
    `UPDATE invitations SET revoked_at = $3
      WHERE organization_id = $1 AND lower(email) = lower($2)
        AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $3`,
    [organizationId, email, at.toISOString()],
  );
  return r.rowCount;
}

/** One invitation of an organization, locked for the change. */
export async function invitationOfOrganization(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<InvitationRow | undefined> {
  const r = await db.query<InvitationRow>(
    `${INVITATION} WHERE i.organization_id = $1 AND i.id = $2 FOR UPDATE OF i`,
    [organizationId, id],
  );
  return r.rows[0];
}

/** The invitation of a link (by its token's hash), locked for the change when `lock`. */
export async function invitationByTokenHash(
  db: Queryable,
  hash: string,
  lock = false,
): Promise<InvitationRow | undefined> {
  const r = await db.query<InvitationRow>(
    `${INVITATION} WHERE i.token_hash = $1${lock ? " FOR UPDATE OF i" : ""}`,
    [hash],
  );
  return r.rows[0];
}

/** The invitation an outbox row e-mails, locked (delivery makes its token). */
export async function invitationOfNotification(
  db: Queryable,
  notificationId: string,
): Promise<InvitationRow | undefined> {
  const r = await db.query<InvitationRow>(`${INVITATION} WHERE i.notification_id = $1 FOR UPDATE OF i`, [
    notificationId,
  ]);
  return r.rows[0];
}

export async function setInvitationTokenHash(db: Queryable, id: string, hash: string): Promise<void> {
  await db.query("UPDATE invitations SET token_hash = $2 WHERE id = $1", [id, hash]);
}

export async function markInvitationAccepted(
  db: Queryable,
  id: string,
  userId: string,
  at: Date,
): Promise<void> {
  await db.query("UPDATE invitations SET accepted_at = $3, accepted_by = $2 WHERE id = $1", [
    id,
    userId,
    at.toISOString(),
  ]);
}

export async function markInvitationRevoked(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query("UPDATE invitations SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1", [
    id,
    at.toISOString(),
  ]);
}
