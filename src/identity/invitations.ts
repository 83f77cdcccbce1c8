import { createHash, randomBytes, randomUUID } from "node:crypto";
import { z } from "zod";
import type { Actor, Role } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden, invalidInput, notFound, ServiceError } from "../core/errors.js";
import { auditMembershipChanged } from "../notifications/audit.js";
import { enqueueNotifications, type NotificationKind } from "../notifications/repository.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  type InvitationRow,
  insertInvitation,
  invitationByTokenHash,
  invitationOfNotification,
  invitationOfOrganization,
  invitationsOf,
  markInvitationAccepted,
  markInvitationRevoked,
  membersOf,
  pendingInvitationCount,
  revokePendingFor,
  setInvitationNotification,
  setInvitationTokenHash,
  userAccount,
  userIdByEmail,
} from "./invitations-repository.js";
import { checkRole, lockOrganization, personOf, requireManager, roleIn } from "./organizations.js";
import { hashPassword } from "./passwords.js";
import { insertUser, membershipRole, putMembership } from "./repository.js";

/**
 * Invitations to an organization (issue #15, point 1). An admin or owner invites an e-mail
 * address with a role (`owner` only by an owner); the invitee gets a single-use link,
 * `${PUBLIC_URL}/invitations/<token>`, valid for 7 days, by e-mail through the notifications
 * outbox (kind `invitation`, the organization's account, no webhook). Opening it, they set a
 * password for a new account or join with the account they are signed in with (the link is the
 * proof: a signed-in user whose e-mail differs may accept; the page says whose account joins).
 *
 * The token (32 random bytes, base64url) is stored only as its SHA-256. It is made when the
 * e-mail is sent (`invitationMailText`, called by the e-mail delivery job): the outbox row keeps
 * a text with a placeholder instead of the link, so the alert history (GET /v1/alerts, the MCP
 * tool, the dashboard) shows the invitation but never a usable link, and nothing in the database
 * (plaintext or encrypted) can be turned into one. If an e-mail is sent again (a retry after a
 * failure), the new e-mail carries a new token and only the newest link works.
 *
 * A used link answers `conflict` with reason `invitation_used`, an expired one
 * `invitation_expired`, a revoked one `invitation_revoked` (the dashboard shows 410 Gone); an
 * unknown one `not_found`. Joining is a membership change, audited like any other.
 */

export const INVITATION_TTL_DAYS = 7;
export const EMAIL_MAX = 320;
/** Pending invitations an organization may have at once. */
export const PENDING_INVITATIONS_MAX = 100;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 1024;
/** Stands in the outbox row for the link's token; the e-mail sent carries the real one. */
export const TOKEN_PLACEHOLDER = "<token: in the e-mail only, never stored>";
export const INVITATION_KIND: NotificationKind = "invitation";

const sha256 = (s: string) => createHash("sha256").update(s).digest("base64url");
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };

export type InvitationState = "pending" | "accepted" | "revoked" | "expired";

export interface InvitationSummary {
  id: string;
  email: string;
  role: Role;
  invitedBy: string | null;
  createdAt: string;
  expiresAt: string;
  state: InvitationState;
  /** Its e-mail: `waiting` in the outbox, `sent`, `failed` (given up), or null (none). */
  mail: "waiting" | "sent" | "failed" | null;
}

/** What an invitation link's page shows. */
export interface InvitationView {
  organizationName: string;
  role: Role;
  email: string;
  invitedBy: string | null;
  expiresAt: string;
}

function stateOf(row: InvitationRow, at: Date): InvitationState {
  if (row.accepted_at) return "accepted";
  if (row.revoked_at) return "revoked";
  if (new Date(row.expires_at).getTime() <= at.getTime()) return "expired";
  return "pending";
}

const summary = (row: InvitationRow, at: Date): InvitationSummary => ({
  id: row.id,
  email: row.email,
  role: row.role,
  invitedBy: row.invited_by_email,
  createdAt: new Date(row.created_at).toISOString(),
  expiresAt: new Date(row.expires_at).toISOString(),
  state: stateOf(row, at),
  mail:
    row.mail_status === "sent"
      ? "sent"
      : row.mail_status === "failed" || row.mail_status === "suppressed"
        ? "failed"
        : row.mail_status
          ? "waiting"
          : null,
});

export function checkEmail(value: string, field = "email"): string {
  const email = value.trim();
  if (!email) throw invalidInput(field, "enter an e-mail address");
  if (email.length > EMAIL_MAX) throw invalidInput(field, `must be at most ${EMAIL_MAX} characters`);
  if (!z.email().safeParse(email).success) throw invalidInput(field, `"${email}" is not an e-mail address`);
  return email;
}

/** A new password and its confirmation: at least 8 characters, at most 1024, both the same. */
export function checkNewPassword(password: string, confirm: string, field = "password"): string {
  if (password.length < PASSWORD_MIN)
    throw invalidInput(field, `must be at least ${PASSWORD_MIN} characters`);
  if (password.length > PASSWORD_MAX) throw invalidInput(field, `must be at most ${PASSWORD_MAX} characters`);
  if (password !== confirm) throw invalidInput("confirm", "does not match the password");
  return password;
}

/**
 * Invites an address to the organization with a role (admin or owner; `owner` only by an owner).
 * A pending invitation of the same address is replaced (revoked). Someone who is a member already
 * is a conflict. The e-mail is queued in the outbox in the same transaction.
 */
export async function inviteMember(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  input: { email: string; role: string },
): Promise<InvitationSummary> {
  const email = checkEmail(input.email);
  const role = checkRole(input.role);
  const me = personOf(actor);
  const at = ctx.now();
  const expiresAt = new Date(at.getTime() + INVITATION_TTL_DAYS * 86_400_000);
  return ctx.stores.db.transaction(async (tx) => {
    const org = await lockOrganization(tx, organizationId);
    const mine = await roleIn(tx, actor, organizationId);
    requireManager(mine, "invite people");
    if (role === "owner" && mine !== "owner") throw forbidden("only an owner may invite an owner");
    const members = await membersOf(tx, organizationId);
    const already = members.find((m) => m.email.toLowerCase() === email.toLowerCase());
    if (already)
      throw new ServiceError(
        "conflict",
        `${already.email} is already a member (${already.role}); change the role instead`,
        {
          field: "email",
          reason: "already_member",
        },
      );
    await revokePendingFor(tx, organizationId, email, at);
    if ((await pendingInvitationCount(tx, organizationId, at)) >= PENDING_INVITATIONS_MAX)
      throw new ServiceError(
        "conflict",
        `the organization has ${PENDING_INVITATIONS_MAX} pending invitations; revoke some or wait until they are used`,
      );
    const inviter = (await userAccount(tx, me))?.email ?? me;
    const id = randomUUID();
    await insertInvitation(tx, { id, organizationId, email, role, invitedBy: me, at, expiresAt });
    const [notificationId] = await enqueueNotifications(tx, {
      kind: INVITATION_KIND,
      account: { userId: me, organizationId },
      connectionId: null,
      recipients: [email],
      webhooks: false,
      subject: `[Vigil] ${inviter} invited you to ${org.name}`,
      body:
        `${inviter} invited you to join the organization "${org.name}" on Vigil as ${role}.\n\n` +
        `Accept the invitation with this link. It works once, until ${expiresAt.toISOString()} (${INVITATION_TTL_DAYS} days):\n` +
        `${ctx.config.publicUrl}/invitations/${TOKEN_PLACEHOLDER}\n\n` +
        `With it you set a password for a new Vigil account for ${email}, or join with an account you already have.\n` +
        "If you did not expect this e-mail, ignore it: nothing happens unless the link is used.\n",
      at,
    });
    if (notificationId) await setInvitationNotification(tx, id, notificationId);
    return {
      id,
      email,
      role,
      invitedBy: inviter,
      createdAt: at.toISOString(),
      expiresAt: expiresAt.toISOString(),
      state: "pending" as const,
      mail: "waiting" as const,
    };
  });
}

/** The organization's invitations (any member may see them): pending first, then those of the last 30 days. */
export async function listInvitations(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
): Promise<InvitationSummary[]> {
  await roleIn(ctx.stores.db, actor, organizationId);
  const at = ctx.now();
  return (await invitationsOf(ctx.stores.db, organizationId, at)).map((r) => summary(r, at));
}

/** Revokes a pending invitation (admin or owner; an owner's invitation only by an owner). */
export async function revokeInvitation(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  invitationId: string,
): Promise<void> {
  await ctx.stores.db.transaction(async (tx) => {
    await lockOrganization(tx, organizationId);
    const mine = await roleIn(tx, actor, organizationId);
    requireManager(mine, "revoke invitations");
    const row =
      invitationId.length <= 100
        ? await invitationOfOrganization(tx, organizationId, invitationId)
        : undefined;
    if (!row) throw notFound(`no invitation with id ${invitationId} in this organization`);
    if (row.role === "owner" && mine !== "owner")
      throw forbidden("only an owner may revoke an owner's invitation");
    const state = stateOf(row, ctx.now());
    if (state !== "pending")
      throw new ServiceError("conflict", `the invitation of ${row.email} is ${state} already`);
    await markInvitationRevoked(tx, row.id, ctx.now());
  });
}

/** The invitation of a link, usable or not; not_found for an unknown link. */
async function rowOfToken(db: Queryable, token: string, lock: boolean): Promise<InvitationRow> {
  const row = TOKEN_SHAPE.test(token) ? await invitationByTokenHash(db, sha256(token), lock) : undefined;
  if (!row)
    throw new ServiceError(
      "not_found",
      "This invitation link is not valid. Check that you opened the whole link, or ask for a new invitation.",
      { reason: "invitation_unknown" },
    );
  return row;
}

function requireUsable(row: InvitationRow, at: Date): void {
  const state = stateOf(row, at);
  if (state === "accepted")
    throw new ServiceError(
      "conflict",
      "This invitation was already used; a link works only once. Sign in, or ask for a new invitation.",
      {
        reason: "invitation_used",
      },
    );
  if (state === "revoked")
    throw new ServiceError(
      "conflict",
      "This invitation was withdrawn. Ask an admin of the organization for a new one.",
      {
        reason: "invitation_revoked",
      },
    );
  if (state === "expired")
    throw new ServiceError(
      "conflict",
      `This invitation expired on ${new Date(row.expires_at).toISOString()} (links work for ${INVITATION_TTL_DAYS} days). Ask for a new one.`,
      { reason: "invitation_expired" },
    );
}

/** Whether a ServiceError is a used, revoked or expired invitation (the dashboard answers 410 Gone). */
export const isGoneInvitation = (err: unknown): boolean =>
  err instanceof ServiceError &&
  ["invitation_used", "invitation_revoked", "invitation_expired"].includes(err.reason ?? "");

/** What the link's page shows; throws when the link is unknown, used, revoked or expired. */
export async function invitationForToken(
  ctx: AppContext,
  token: string,
): Promise<InvitationView & { userExists: boolean }> {
  const row = await rowOfToken(ctx.stores.db, token, false);
  requireUsable(row, ctx.now());
  return {
    organizationName: row.organization_name,
    role: row.role,
    email: row.email,
    invitedBy: row.invited_by_email,
    expiresAt: new Date(row.expires_at).toISOString(),
    userExists: !!(await userIdByEmail(ctx.stores.db, row.email)),
  };
}

/** Adds the user to the organization with the invitation's role (a higher role held already is kept), audited. */
async function join(tx: Queryable, row: InvitationRow, userId: string, at: Date): Promise<Role> {
  const from = await membershipRole(tx, userId, row.organization_id);
  const to = from && RANK[from] >= RANK[row.role] ? from : row.role;
  if (to !== from) {
    await putMembership(tx, { organizationId: row.organization_id, userId, role: to });
    await auditMembershipChanged(tx, {
      organizationId: row.organization_id,
      userId,
      from,
      to,
      at,
      by: { type: "user", userId },
    });
  }
  await markInvitationAccepted(tx, row.id, userId, at);
  return to;
}

/** Accepts the invitation with the signed-in user's account, whatever its e-mail (the link is the proof). Single use. */
export async function acceptInvitation(
  ctx: AppContext,
  actor: Actor,
  token: string,
): Promise<{ organizationId: string; organizationName: string; role: Role }> {
  const userId = personOf(actor);
  if (actor.type !== "user") throw forbidden("an invitation is accepted by a signed-in person");
  return ctx.stores.db.transaction(async (tx) => {
    const row = await rowOfToken(tx, token, true);
    const at = ctx.now();
    requireUsable(row, at);
    const role = await join(tx, row, userId, at);
    return { organizationId: row.organization_id, organizationName: row.organization_name, role };
  });
}

/**
 * Accepts the invitation with a new account for the invited address and the password given
 * (when no user has that address yet: otherwise `conflict`, reason `account_exists`, sign in
 * first). The account gets the organization's plan. Single use.
 */
export async function acceptInvitationAsNewUser(
  ctx: AppContext,
  token: string,
  input: { password: string; confirm: string },
): Promise<{ userId: string; email: string; organizationId: string; role: Role }> {
  const password = checkNewPassword(input.password, input.confirm);
  // a quick look first, so a used or unknown link costs no password hashing
  requireUsable(await rowOfToken(ctx.stores.db, token, false), ctx.now());
  const passwordHash = await hashPassword(password);
  return ctx.stores.db.transaction(async (tx) => {
    const row = await rowOfToken(tx, token, true);
    const at = ctx.now();
    requireUsable(row, at);
    if (await userIdByEmail(tx, row.email))
      throw new ServiceError(
        "conflict",
        `An account for ${row.email} exists already: sign in to accept the invitation.`,
        {
          reason: "account_exists",
        },
      );
    const userId = randomUUID();
    await insertUser(tx, { id: userId, email: row.email, passwordHash, plan: row.organization_plan });
    const role = await join(tx, row, userId, at);
    return { userId, email: row.email, organizationId: row.organization_id, role };
  });
}

/** An invitation e-mail that will never be sent (revoked, used or expired first); delivery gives it up. */
export class UnsendableInvitation extends Error {
  override name = "UnsendableInvitation";
}

/**
 * The text of an invitation e-mail about to be sent (called by the delivery job for kind
 * `invitation`): makes the link's token now, stores its hash (committed before the e-mail goes
 * out, so the link works when it arrives; an earlier link of this invitation stops working), and
 * returns the outbox text with the link in place of the placeholder. Throws
 * `UnsendableInvitation` when the invitation is no longer pending.
 */
export async function invitationMailText(
  db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  n: { id: string; body: string },
  at: Date,
): Promise<string> {
  return db.transaction(async (tx) => {
    const row = await invitationOfNotification(tx, n.id);
    if (!row) throw new UnsendableInvitation("the invitation of this e-mail no longer exists");
    const state = stateOf(row, at);
    if (state !== "pending") throw new UnsendableInvitation(`the invitation is ${state}; not sent`);
    if (!n.body.includes(TOKEN_PLACEHOLDER))
      throw new UnsendableInvitation("the invitation e-mail has no link");
    const token = randomBytes(32).toString("base64url");
    await setInvitationTokenHash(tx, row.id, sha256(token));
    return n.body.replace(TOKEN_PLACEHOLDER, token);
  });
}
