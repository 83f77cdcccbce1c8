import { type Actor, actingUser, ROLES, type Role } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden, invalidInput, notFound, ServiceError } from "../core/errors.js";
import {
  auditActorOf,
  auditMemberRemoved,
  auditMembershipChanged,
  auditOrganizationRenamed,
} from "../notifications/audit.js";
import type { Queryable } from "../stores/relational/types.js";
import { AccountError, createOrg } from "./accounts.js";
import {
  deleteMembership,
  membersOf,
  organizationRow,
  organizationsOfUser,
  ownerCount,
  renameOrganizationRow,
  userAccount,
} from "./invitations-repository.js";
import type { Plan } from "./plans.js";
import { membershipRole, putMembership } from "./repository.js";

/**
 * The rules of organizations (spec: roles `member`, `admin`, `owner`; "only admins and owners
 * manage; the last owner cannot leave or be demoted"), shared by every door: the dashboard now,
 * a REST or MCP door later. Each verb takes the acting user as an `Actor` and throws
 * `ServiceError`s: `not_found` for an organization the actor is not a member of (its existence is
 * not revealed), `forbidden` for a role that may not do it, `conflict` for the last-owner rule,
 * `invalid_input` for a bad name or role. Every change of a membership or a name is an audit entry
 * in the alert history (src/notifications/audit.ts), written in the change's transaction.
 *
 * Who may do what:
 * - any member: see the organization, its members and its invitations; leave it;
 * - admin or owner: rename it, change roles, remove members, invite and revoke invitations;
 * - only an owner: make someone an owner, or change or remove an owner.
 * - never: leave, demote or remove the last owner (409).
 */

export const ORGANIZATION_NAME_MAX = 200;

export interface MyOrganization {
  id: string;
  name: string;
  plan: Plan;
  role: Role;
  members: number;
  createdAt: string;
}

export interface Member {
  userId: string;
  email: string;
  role: Role;
  since: string;
}

export interface OrganizationDetail {
  id: string;
  name: string;
  plan: Plan;
  /** The actor's role there. */
  role: Role;
  members: Member[];
  /** Whether the actor may rename, change roles, remove members and invite (admin or owner). */
  canManage: boolean;
  /** Whether the actor may make, change or remove owners (owner). */
  isOwner: boolean;
}

/** The user behind the actor; a key bound to another organization, or the system, acts for nobody here. */
export function personOf(actor: Actor): string {
  const user = actingUser(actor);
  if (!user) throw forbidden("organizations are managed by a signed-in person");
  return user;
}

/** The actor's role in the organization; not_found when not a member (or the organization does not exist). */
export async function roleIn(db: Queryable, actor: Actor, organizationId: string): Promise<Role> {
  const user = personOf(actor);
  if (actor.type === "api_key" && actor.scope === "organization" && actor.organizationId !== organizationId)
    throw notFound(`no organization with id ${organizationId}`);
  const role = organizationId.length <= 100 ? await membershipRole(db, user, organizationId) : null;
  if (!role) throw notFound(`no organization with id ${organizationId}`);
  return role;
}

/**
 * Locks the organization for a change of its name or members, so changes take turns (two owners
 * demoting each other at once cannot leave it without an owner). not_found when it does not exist.
 */
export async function lockOrganization(tx: Queryable, organizationId: string) {
  const org = organizationId.length <= 100 ? await organizationRow(tx, organizationId, true) : undefined;
  if (!org) throw notFound(`no organization with id ${organizationId}`);
  return org;
}

const manages = (role: Role) => role === "admin" || role === "owner";

export function requireManager(role: Role, what: string): void {
  if (!manages(role))
    throw forbidden(`only an admin or owner of the organization may ${what}; you are a ${role}`);
}

export function checkRole(value: string, field = "role"): Role {
  if (!(ROLES as readonly string[]).includes(value))
    throw invalidInput(field, `must be one of ${ROLES.join(", ")}`);
  return value as Role;
}

export function checkOrganizationName(value: string, field = "name"): string {
  const name = value.trim();
  if (!name) throw invalidInput(field, "must not be empty");
  if (name.length > ORGANIZATION_NAME_MAX)
    throw invalidInput(field, `must be at most ${ORGANIZATION_NAME_MAX} characters`);
  if ([...name].some((c) => c.charCodeAt(0) < 32 || c.charCodeAt(0) === 127))
    throw invalidInput(field, "must not contain control characters");
  return name;
}

/** The organizations the actor belongs to, with the actor's role and the member count. */
export async function listMyOrganizations(ctx: AppContext, actor: Actor): Promise<MyOrganization[]> {
  const user = personOf(actor);
  const rows = await organizationsOfUser(ctx.stores.db, user);
  return rows
    .filter(
      (r) => !(actor.type === "api_key" && actor.scope === "organization" && actor.organizationId !== r.id),
    )
    .map((r) => ({
      id: r.id,
      name: r.name,
      plan: r.plan,
      role: r.role,
      members: Number(r.members),
      createdAt: new Date(r.created_at).toISOString(),
    }));
}

/**
 * Creates an organization with the actor as its owner. It gets the actor's plan: on a
 * self-hosted install the first owner is on `enterprise` (no billing), and so are the
 * organizations they create.
 */
export async function createOrganization(
  ctx: AppContext,
  actor: Actor,
  input: { name: string },
): Promise<{ id: string; name: string; plan: Plan }> {
  const user = personOf(actor);
  if (actor.type === "api_key" && actor.scope === "organization")
    throw forbidden("an organization key cannot create organizations; use a personal key or the dashboard");
  const name = checkOrganizationName(input.name);
  const me = await userAccount(ctx.stores.db, user);
  if (!me) throw notFound(`no user with id ${user}`);
  try {
    return await createOrg(ctx.stores.db, { name, owner: user, plan: me.plan });
  } catch (err) {
    if (err instanceof AccountError) throw new ServiceError("invalid_input", err.message);
    throw err;
  }
}

/** An organization the actor belongs to, with its members. */
export async function getOrganization(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
): Promise<OrganizationDetail> {
  const db = ctx.stores.db;
  const role = await roleIn(db, actor, organizationId);
  const org = await organizationRow(db, organizationId);
  if (!org) throw notFound(`no organization with id ${organizationId}`);
  const members = await membersOf(db, organizationId);
  return {
    id: org.id,
    name: org.name,
    plan: org.plan,
    role,
    canManage: manages(role),
    isOwner: role === "owner",
    members: members.map((m) => ({
      userId: m.user_id,
      email: m.email,
      role: m.role,
      since: new Date(m.created_at).toISOString(),
    })),
  };
}

/** Renames the organization (admin or owner). Audited. */
export async function renameOrganization(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  input: { name: string },
): Promise<{ id: string; name: string }> {
  const name = checkOrganizationName(input.name);
  return ctx.stores.db.transaction(async (tx) => {
    const org = await lockOrganization(tx, organizationId);
    requireManager(await roleIn(tx, actor, organizationId), "rename it");
    if (org.name !== name) {
      await renameOrganizationRow(tx, organizationId, name);
      await auditOrganizationRenamed(tx, {
        organizationId,
        from: org.name,
        to: name,
        at: ctx.now(),
        by: auditActorOf(actor),
      });
    }
    return { id: organizationId, name };
  });
}

const lastOwner = (what: string) =>
  new ServiceError(
    "conflict",
    `${what}: an organization needs at least one owner. Make another member owner first.`,
    { reason: "last_owner" },
  );

/**
 * Changes a member's role (admin or owner). Only an owner may make someone owner or change an
 * owner's role; the last owner cannot be demoted. Audited when the role changes.
 */
export async function changeRole(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  input: { userId: string; role: string },
): Promise<Member> {
  const to = checkRole(input.role);
  return ctx.stores.db.transaction(async (tx) => {
    await lockOrganization(tx, organizationId);
    const mine = await roleIn(tx, actor, organizationId);
    requireManager(mine, "change roles");
    const target = (await membersOf(tx, organizationId)).find((m) => m.user_id === input.userId);
    if (!target) throw notFound(`no member with id ${input.userId} in this organization`);
    if ((target.role === "owner" || to === "owner") && mine !== "owner")
      throw forbidden("only an owner may make someone owner or change an owner's role");
    if (target.role === to) return member(target);
    if (target.role === "owner" && (await ownerCount(tx, organizationId)) <= 1)
      throw lastOwner(`${target.email} is the last owner and cannot become ${to}`);
    await putMembership(tx, { organizationId, userId: target.user_id, role: to });
    await auditMembershipChanged(tx, {
      organizationId,
      userId: target.user_id,
      from: target.role,
      to,
      at: ctx.now(),
      by: auditActorOf(actor),
    });
    return member({ ...target, role: to });
  });
}

/**
 * Removes a member (admin or owner; an owner only by an owner). The last owner cannot be
 * removed. Removing yourself is leaving. Audited.
 */
export async function removeMember(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  input: { userId: string },
): Promise<void> {
  const me = personOf(actor);
  if (input.userId === me) return leaveOrganization(ctx, actor, organizationId);
  await ctx.stores.db.transaction(async (tx) => {
    await lockOrganization(tx, organizationId);
    const mine = await roleIn(tx, actor, organizationId);
    requireManager(mine, "remove members");
    const target = (await membersOf(tx, organizationId)).find((m) => m.user_id === input.userId);
    if (!target) throw notFound(`no member with id ${input.userId} in this organization`);
    if (target.role === "owner" && mine !== "owner") throw forbidden("only an owner may remove an owner");
    if (target.role === "owner" && (await ownerCount(tx, organizationId)) <= 1)
      throw lastOwner(`${target.email} is the last owner and cannot be removed`);
    await auditMemberRemoved(tx, {
      organizationId,
      userId: target.user_id,
      role: target.role,
      left: false,
      at: ctx.now(),
      by: auditActorOf(actor),
    });
    await deleteMembership(tx, organizationId, target.user_id);
  });
}

/** The actor leaves the organization (any member); the last owner cannot. Audited. */
export async function leaveOrganization(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
): Promise<void> {
  const me = personOf(actor);
  await ctx.stores.db.transaction(async (tx) => {
    await lockOrganization(tx, organizationId);
    const mine = await roleIn(tx, actor, organizationId);
    if (mine === "owner" && (await ownerCount(tx, organizationId)) <= 1)
      throw lastOwner("You are the last owner and cannot leave");
    await auditMemberRemoved(tx, {
      organizationId,
      userId: me,
      role: mine,
      left: true,
      at: ctx.now(),
      by: auditActorOf(actor),
    });
    await deleteMembership(tx, organizationId, me);
  });
}

const member = (m: { user_id: string; email: string; role: Role; created_at: Date }): Member => ({
  userId: m.user_id,
  email: m.email,
  role: m.role,
  since: new Date(m.created_at).toISOString(),
});
