import { randomUUID } from "node:crypto";
import {
  type Actor,
  hasPermission,
  PERMISSIONS,
  type Permission,
  type Role,
  type UserActor,
} from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden, invalidInput, notFound } from "../core/errors.js";
import { auditActorOf, auditKeyCreated, auditKeyRevoked } from "../notifications/audit.js";
import { insertKey, keyStore } from "./keys.js";
import { keysOfUser, membershipsOfUser, ownKeyForUpdate } from "./key-repository.js";
import { type KeyKind, membershipRole, revokeKeyRow } from "./repository.js";

/**
 * API keys managed by the signed-in person (the dashboard's Profile → API tab), with the rules of
 * the CLI (`vigil admin create-key` / `revoke-key`, identity/accounts.ts):
 *
 * - Only a person signed in to the dashboard (a `user` actor through a session) manages keys: an
 *   API key cannot mint or revoke keys (a narrow key must not make itself a wider one), nor can an
 *   MCP client's read-only OAuth token.
 * - A key is personal, or for one organization where the user is admin or owner (an organization
 *   key reads every connection of the organization). It carries at least one permission, and
 *   only permissions the actor holds.
 * - A user revokes only keys they own (of any kind, usage-ingestion keys of their gateways
 *   included). Another user's key, an organization admin's included, is "not found": nothing
 *   about it is told. An organization key stops working by itself when its holder leaves the
 *   organization (removing a member is the admins' lever), and `vigil admin revoke-key` revokes
 *   any key.
 * - Creating and revoking are audited (e-mailed to the account's owners and listed in the alert
 *   history) with the acting user as `by`; a revocation takes effect at once on this node (the
 *   key cache is told) and within 3 s on the others.
 */

export const KEY_NAME_MAX = 100;
/** How many keys a list shows (a user has a handful; the cap only bounds the page). */
export const KEY_LIST_LIMIT = 500;

/** A key as a list shows it; `kind` is the stored kind, `organization`/`connection` what it is bound to. */
export interface ListedKey {
  id: string;
  kind: KeyKind;
  name: string | null;
  /** The key's first characters (`vgl_AbCdEfGh`), to tell keys apart. */
  prefix: string;
  permissions: Permission[];
  organization: { id: string; name: string } | null;
  connection: { id: string; name: string } | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface CreatedKey {
  id: string;
  /** The key itself: shown once, never stored (only its hash is). */
  key: string;
  kind: "personal" | "organization";
  name: string;
  permissions: Permission[];
  organizationId: string | null;
}

const date = (v: Date | string | null): Date | null => (v === null ? null : new Date(v));

/** The person managing keys, or a 403 for any other caller. */
function asKeyManager(actor: Actor): UserActor {
  if (actor.type === "user" && actor.via === "session") return actor;
  throw forbidden(
    "API keys are managed by a signed-in person in the dashboard (Profile → API keys) or with vigil admin; " +
      "an API key or an OAuth token cannot manage keys.",
  );
}

/**
 * The signed-in user's keys (every kind, revoked ones included, active first), newest first.
 * `last_used_at` is written in batches; this node's pending batch is written first, so the list
 * is current for uses this node saw (other nodes' within their 30 s batches).
 */
export async function listKeysFor(ctx: AppContext, actor: Actor): Promise<ListedKey[]> {
  const u = asKeyManager(actor);
  await keyStore(ctx).flushLastUsed();
  const rows = await keysOfUser(ctx.stores.db, u.userId, KEY_LIST_LIMIT);
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    name: r.name,
    prefix: r.display_prefix,
    permissions: r.permissions,
    organization: r.organization_id
      ? { id: r.organization_id, name: r.organization_name ?? r.organization_id }
      : null,
    connection: r.connection_id ? { id: r.connection_id, name: r.connection_name ?? r.connection_id } : null,
    createdAt: date(r.created_at) as Date,
    lastUsedAt: date(r.last_used_at),
    revokedAt: date(r.revoked_at),
  }));
}

/** The organizations the signed-in user belongs to, with the role held in each, by name. */
export async function organizationsOf(
  ctx: AppContext,
  actor: Actor,
): Promise<{ id: string; name: string; role: Role }[]> {
  if (actor.type !== "user" && actor.type !== "api_key") return [];
  const all = await membershipsOfUser(ctx.stores.db, actor.userId);
  return actor.type === "api_key" && actor.scope === "organization"
    ? all.filter((o) => o.id === actor.organizationId)
    : all;
}

/** The organizations the signed-in user may make keys for: those where the role is admin or owner. */
export async function keyOrganizationsFor(ctx: AppContext, actor: Actor) {
  const u = asKeyManager(actor);
  return (await organizationsOf(ctx, u)).filter((o) => o.role === "admin" || o.role === "owner");
}

/** The input of `createKeyFor`, as a form or a request gives it. */
export interface CreateKeyInput {
  name: string;
  permissions: readonly string[];
  /** An organization's id for an organization key; absent, empty or null for a personal key. */
  organizationId?: string | null;
}

/** Checks the input; the messages name the field (`name`, `permissions`, `organization_id`). */
function checkKeyInput(actor: UserActor, k: CreateKeyInput) {
  const name = k.name.trim();
  if (!name) throw invalidInput("name", "must not be empty: name the key after where it is used");
  if (name.length > KEY_NAME_MAX) throw invalidInput("name", `must be at most ${KEY_NAME_MAX} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalidInput("name", "must not contain control characters");
  if (k.permissions.length === 0) throw invalidInput("permissions", "choose at least one permission");
  for (const p of k.permissions)
    if (!(PERMISSIONS as readonly string[]).includes(p))
      throw invalidInput(
        "permissions",
        `unknown permission "${p.slice(0, 50)}"; use ${PERMISSIONS.join(", ")}`,
      );
  const permissions = PERMISSIONS.filter((p) => k.permissions.includes(p));
  for (const p of permissions)
    if (!hasPermission(actor, p)) throw forbidden(`You do not hold ${p}, so a key you make cannot either`);
  const org = k.organizationId?.trim() || null;
  if (org !== null && org.length > 200) throw invalidInput("organization_id", "is not an organization id");
  return { name, permissions, org };
}

/**
 * Makes a key for the signed-in user: personal, or for an organization where the user is admin
 * or owner (403 otherwise, whether the organization exists or not: nothing is told about
 * organizations the user is not in). Answers the key once; only its hash is stored. Audited.
 */
export async function createKeyFor(
  ctx: AppContext,
  actor: Actor,
  input: CreateKeyInput,
): Promise<CreatedKey> {
  const u = asKeyManager(actor);
  const { name, permissions, org } = checkKeyInput(u, input);
  const id = randomUUID();
  const key = await ctx.stores.db.transaction(async (tx) => {
    if (org !== null) {
      const role = await membershipRole(tx, u.userId, org);
      if (role !== "admin" && role !== "owner")
        throw forbidden("Organization keys need the admin or owner role in that organization");
    }
    const key = await insertKey(tx, {
      id,
      userId: u.userId,
      kind: org ? "organization" : "personal",
      organizationId: org,
      name,
      permissions,
    });
    await auditKeyCreated(tx, id, ctx.now(), auditActorOf(u));
    return key;
  });
  return { id, key, kind: org ? "organization" : "personal", name, permissions, organizationId: org };
}

/**
 * Revokes one of the signed-in user's keys: 404 when the user has no key with that id (another
 * user's key included; nothing changes). Revoking a revoked key again changes nothing and is not
 * audited again. The key stops at once on this node, within 3 s on the others.
 */
export async function revokeKeyFor(
  ctx: AppContext,
  actor: Actor,
  keyId: string,
): Promise<{ id: string; revoked: true; already: boolean }> {
  const u = asKeyManager(actor);
  const at = ctx.now();
  const already = await ctx.stores.db.transaction(async (tx) => {
    const k = await ownKeyForUpdate(tx, u.userId, keyId);
    if (!k) throw notFound(`No API key ${keyId.slice(0, 100)} among yours`);
    if (k.revoked_at) return true;
    await auditKeyRevoked(tx, keyId, at, auditActorOf(u));
    await revokeKeyRow(tx, keyId, at);
    return false;
  });
  keyStore(ctx).invalidate((k) => k.keyId === keyId);
  return { id: keyId, revoked: true, already };
}
