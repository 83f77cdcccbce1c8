import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden, notFound } from "../core/errors.js";
import { asManager, roleIn } from "../identity/visibility.js";

/**
 * The account whose alerting settings a caller reads and changes (webhooks, channels, routing
 * rules, notification settings): a personal key's (or signed-in) user, or an organization key's
 * organization, as budgets decide it.
 */
export type AlertAccount = { scope: "user" | "organization"; id: string };

export function accountOf(actor: Actor, what = "alert settings"): AlertAccount {
  if (actor.type === "api_key")
    return actor.scope === "organization" && actor.organizationId
      ? { scope: "organization", id: actor.organizationId }
      : { scope: "user", id: actor.userId };
  if (actor.type === "user")
    return actor.actingFor
      ? { scope: "organization", id: actor.actingFor }
      : { scope: "user", id: actor.userId };
  throw forbidden(`Only an API key or a signed-in user has ${what}`);
}

/**
 * The account a caller reads: as `accountOf`; a signed-in user acting for an organization must
 * be one of its members (404 otherwise, as for an organization they cannot see).
 */
export async function readableAccount(ctx: AppContext, actor: Actor, what: string): Promise<AlertAccount> {
  const account = accountOf(actor, what);
  if (
    actor.type === "user" &&
    account.scope === "organization" &&
    !(await roleIn(ctx.stores.db, actor.userId, account.id))
  )
    throw notFound(`Organization ${account.id} not found`);
  return account;
}

/** The account of someone who may change its alerting: an organization's needs its admin or owner role. */
export async function managedAccount(ctx: AppContext, actor: Actor, what: string): Promise<AlertAccount> {
  const p = asManager(actor);
  const account = accountOf(p, what);
  if (account.scope === "organization") {
    const role = await roleIn(ctx.stores.db, p.userId, account.id);
    if (role !== "admin" && role !== "owner")
      throw forbidden(
        `Only an organization's admins and owners may change its ${what}; this key's user is ${role ? `a ${role}` : "not a member"}`,
      );
  }
  return account;
}
