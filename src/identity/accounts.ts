import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import { auditKeyCreated, auditKeyRevoked, auditMembershipChanged } from "../notifications/audit.js";
import { insertKey } from "./keys.js";
import { hashPassword } from "./passwords.js";
import { PLANS, type Plan } from "./plans.js";
import type { Permission, Role } from "../core/actor.js";
import type { KeyKind } from "./keys.js";
import {
  insertOrganization,
  insertUser,
  membershipRole,
  organizationExists,
  putMembership,
  revokeKeyRow,
  userExists,
} from "./repository.js";

/** A refused account operation; the message says what to do. */
export class AccountError extends Error {
  override name = "AccountError";
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === "23505";

async function requireUser(db: Queryable, id: string): Promise<void> {
  if (!(await userExists(db, id))) throw new AccountError(`no user with id ${id}`);
}

async function requireOrg(db: Queryable, id: string): Promise<void> {
  if (!(await organizationExists(db, id))) throw new AccountError(`no organization with id ${id}`);
}

export function checkPlan(plan: string): Plan {
  if (!(PLANS as readonly string[]).includes(plan))
    throw new AccountError(`--plan must be one of ${PLANS.join(", ")}`);
  return plan as Plan;
}

export async function createUser(
  db: RelationalStore,
  u: { email: string; plan?: string; password?: string },
) {
  const email = z.email().safeParse(u.email.trim());
  if (!email.success) throw new AccountError(`--email: "${u.email}" is not an e-mail address`);
  const plan = checkPlan(u.plan ?? "free");
  if (u.password !== undefined && u.password.length < 8)
    throw new AccountError("--password must be at least 8 characters");
  const id = randomUUID();
  try {
    await insertUser(db, {
      id,
      email: email.data,
      passwordHash: u.password ? await hashPassword(u.password) : null,
      plan,
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AccountError(`a user with the e-mail ${email.data} already exists`);
    throw err;
  }
  return { id, email: email.data, plan };
}

export async function createOrg(db: RelationalStore, o: { name: string; owner: string; plan?: string }) {
  const name = o.name.trim();
  if (!name) throw new AccountError("--name must not be empty");
  const plan = checkPlan(o.plan ?? "free");
  const id = randomUUID();
  await db.transaction(async (tx) => {
    await requireUser(tx, o.owner);
    await insertOrganization(tx, { id, name, plan });
    await putMembership(tx, { organizationId: id, userId: o.owner, role: "owner" });
  });
  return { id, name, plan };
}

/** Gives a user a role in an organization; a change is audited (e-mailed to its owners and admins). */
export async function addMember(
  db: RelationalStore,
  m: { org: string; user: string; role: string; at?: Date },
) {
  if (!["member", "admin", "owner"].includes(m.role))
    throw new AccountError("--role must be member, admin or owner");
  await db.transaction(async (tx) => {
    await requireOrg(tx, m.org);
    await requireUser(tx, m.user);
    const from = await membershipRole(tx, m.user, m.org);
    await putMembership(tx, { organizationId: m.org, userId: m.user, role: m.role as Role });
    if (from !== m.role)
      await auditMembershipChanged(tx, {
        organizationId: m.org,
        userId: m.user,
        from,
        to: m.role as Role,
        at: m.at ?? new Date(),
        by: { type: "admin" },
      });
  });
  return { org_id: m.org, user_id: m.user, role: m.role as Role };
}

/**
 * A personal key, or with `org` an organization key. Minting an organization key needs the
 * admin or owner role there: it reads every connection of the organization. Audited: the
 * account's owner(s) are told (`at`: the caller's clock, the wall clock by default).
 */
export async function createKey(
  db: RelationalStore,
  k: { user: string; org?: string; permissions: Permission[]; name?: string; at?: Date },
) {
  const kind: KeyKind = k.org ? "organization" : "personal";
  const id = randomUUID();
  const key = await db.transaction(async (tx) => {
    await requireUser(tx, k.user);
    if (k.org) {
      await requireOrg(tx, k.org);
      const role = await membershipRole(tx, k.user, k.org);
      if (role !== "admin" && role !== "owner")
        throw new AccountError("organization keys need the admin or owner role in that organization");
    }
    const key = await insertKey(tx, {
      id,
      userId: k.user,
      kind,
      organizationId: k.org ?? null,
      name: k.name ?? null,
      permissions: k.permissions,
    });
    await auditKeyCreated(tx, id, k.at ?? new Date(), { type: "admin" });
    return key;
  });
  return { id, key, kind, permissions: k.permissions };
}

/**
 * Revokes a key at `at` (the caller's clock: the CLI has no app context, a server passes
 * ctx.now()). Audited once: revoking a revoked key again changes nothing.
 */
export async function revokeKey(db: RelationalStore, id: string, at: Date) {
  await db.transaction(async (tx) => {
    await auditKeyRevoked(tx, id, at, { type: "admin" });
    if (!(await revokeKeyRow(tx, id, at))) throw new AccountError(`no API key with id ${id}`);
  });
  return { id, revoked: true as const };
}
