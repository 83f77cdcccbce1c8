import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import { insertKey } from "./keys.js";
import { hashPassword } from "./passwords.js";
import { PLANS, type Plan } from "./plans.js";
import type { KeyKind, Permission, Role } from "./principal.js";

/** A refused account operation; the message says what to do. */
export class AccountError extends Error {
  override name = "AccountError";
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === "23505";

async function requireUser(db: Queryable, id: string): Promise<void> {
  const r = await db.query("SELECT 1 FROM users WHERE id = $1", [id]);
  if (r.rows.length === 0) throw new AccountError(`no user with id ${id}`);
}

async function requireOrg(db: Queryable, id: string): Promise<void> {
  const r = await db.query("SELECT 1 FROM organizations WHERE id = $1", [id]);
  if (r.rows.length === 0) throw new AccountError(`no organization with id ${id}`);
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
    await db.query("INSERT INTO users (id, email, password_hash, plan) VALUES ($1, $2, $3, $4)", [
      id,
      email.data,
      u.password ? await hashPassword(u.password) : null,
      plan,
    ]);
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
    await tx.query("INSERT INTO organizations (id, name, plan) VALUES ($1, $2, $3)", [id, name, plan]);
    await tx.query("INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'owner')", [
      id,
      o.owner,
    ]);
  });
  return { id, name, plan };
}

export async function addMember(db: RelationalStore, m: { org: string; user: string; role: string }) {
  if (!["member", "admin", "owner"].includes(m.role))
    throw new AccountError("--role must be member, admin or owner");
  await db.transaction(async (tx) => {
    await requireOrg(tx, m.org);
    await requireUser(tx, m.user);
    await tx.query(
      `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
      [m.org, m.user, m.role],
    );
  });
  return { org_id: m.org, user_id: m.user, role: m.role as Role };
}

/**
 * A personal key, or with `org` an organization key. Minting an organization key needs the
 * admin or owner role there: it reads every connection of the organization.
 */
export async function createKey(
  db: RelationalStore,
  k: { user: string; org?: string; permissions: Permission[]; name?: string },
) {
  const kind: KeyKind = k.org ? "organization" : "personal";
  const id = randomUUID();
  const key = await db.transaction(async (tx) => {
    await requireUser(tx, k.user);
    if (k.org) {
      await requireOrg(tx, k.org);
      const r = await tx.query<{ role: Role }>(
        "SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2",
        [k.org, k.user],
      );
      const role = r.rows[0]?.role;
      if (role !== "admin" && role !== "owner")
        throw new AccountError("organization keys need the admin or owner role in that organization");
    }
    return insertKey(tx, {
      id,
      userId: k.user,
      kind,
      organizationId: k.org ?? null,
      name: k.name ?? null,
      permissions: k.permissions,
    });
  });
  return { id, key, kind, permissions: k.permissions };
}

export async function revokeKey(db: RelationalStore, id: string) {
  const r = await db.query("UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1", [
    id,
  ]);
  if (r.rowCount === 0) throw new AccountError(`no API key with id ${id}`);
  return { id, revoked: true as const };
}
