import { requireAccess } from "../connections/access.js";
import { connectionNotFound } from "../connections/errors.js";
import { type Actor, systemActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden } from "../core/errors.js";
import { asManager, roleIn } from "../identity/visibility.js";
import {
  applyBudget,
  type BudgetFigures,
  budgetFigures,
  type BudgetSubject,
  releaseHolder,
} from "./evaluate.js";
import { type Month, monthOf } from "./month.js";
import {
  type BudgetRow,
  type BudgetScope,
  deleteBudget,
  lockBudget,
  reconcileRunning,
  selectAccountConnections,
  selectAccountName,
  selectBudget,
  selectConnectionRef,
  selectRunning,
  upsertBudget,
} from "./repository.js";
import { budgetChanges } from "./coverage.js";
import { toCents } from "./schema.js";
import { spendByConnection, totalCents } from "./spend.js";

/**
 * Monthly spend budgets: per connection (PUT/GET /v1/connections/{id}/budget) and per account
 * (PUT/GET /v1/budget: a personal key's user, covering the user's personal connections; an
 * organization key's organization, covering its connections). Spend is the UTC calendar month's,
 * counted as PUT /v1/usage counts it (spend.ts). Setting a budget evaluates it at once
 * (evaluate.ts); the budget job re-evaluates every budget every few minutes (job.ts).
 */

export type ConnectionBudget = { connection_id: string } & BudgetFigures;
export type AccountBudget = {
  account_type: "user" | "organization";
  account_id: string;
  connection_count: number;
} & BudgetFigures;

type Account = { scope: "user" | "organization"; id: string };

/** The account a caller's budget is: a personal key's (or signed-in) user, an organization key's organization. */
function accountOf(actor: Actor): Account {
  if (actor.type === "api_key")
    return actor.scope === "organization" && actor.organizationId
      ? { scope: "organization", id: actor.organizationId }
      : { scope: "user", id: actor.userId };
  if (actor.type === "user") return { scope: "user", id: actor.userId };
  throw forbidden("Only an API key or a signed-in user has an account budget");
}

/**
 * Spend is read as the system: the caller's access to the connection was checked first, and an
 * account's connections are the caller's own by definition.
 */
const reader = systemActor("budgets");

const setterOf = (actor: Actor) =>
  actor.type === "api_key" ? actor.keyId : actor.type === "user" ? actor.userId : null;

/** A connection budget's subject: the connection, told to its owner or its organization's owners and admins. */
export async function connectionSubject(
  ctx: AppContext,
  connectionId: string,
): Promise<BudgetSubject | null> {
  const c = await selectConnectionRef(ctx.stores.db, connectionId);
  if (!c) return null;
  return {
    scope: "connection",
    targetId: c.id,
    label: c.service_name,
    path: `/v1/connections/${c.id}/budget`,
    account: { userId: c.user_id, organizationId: c.organization_id },
    connections: [c],
  };
}

/** An account budget's subject: the account's connections, told to the user or the organization's owners and admins. */
export async function accountSubject(ctx: AppContext, account: Account): Promise<BudgetSubject | null> {
  const db = ctx.stores.db;
  const name = await selectAccountName(db, account);
  if (name === undefined) return null;
  return {
    scope: account.scope,
    targetId: account.id,
    label: account.scope === "organization" ? `organization ${name}` : `account ${name}`,
    path: "/v1/budget",
    account:
      account.scope === "organization"
        ? { userId: "", organizationId: account.id }
        : { userId: account.id, organizationId: null },
    connections: await selectAccountConnections(db, account),
  };
}

/** The subject of a stored budget row (null when its connection or account is gone). */
export const subjectOf = (ctx: AppContext, row: Pick<BudgetRow, "scope" | "target_id">) =>
  row.scope === "connection"
    ? connectionSubject(ctx, row.target_id)
    : accountSubject(ctx, { scope: row.scope, id: row.target_id });

/** The month's spend of a subject: per connection and in all, in cents. */
export async function subjectSpend(
  ctx: AppContext,
  actor: Actor,
  s: BudgetSubject,
  month: Month,
  at: Date,
  cache?: Map<string, number>,
) {
  const byConnection = await spendByConnection(
    ctx,
    actor,
    s.connections.map((c) => c.id),
    month,
    at,
    cache,
  );
  return { byConnection, cents: totalCents(byConnection) };
}

/**
 * Sets (cents) or removes (null) a budget and evaluates it at once, in one transaction with the
 * warnings and incident changes that follow; answers the month's figures.
 */
async function putBudget(
  ctx: AppContext,
  actor: Actor,
  s: BudgetSubject,
  cents: number | null,
): Promise<BudgetFigures> {
  const db = ctx.stores.db;
  const at = ctx.now();
  const month = monthOf(at);
  const seen = (await selectRunning(db, s.scope, s.targetId, month.label)) ?? 0;
  const spend = await subjectSpend(ctx, reader, s, month, at);
  await db.transaction(async (tx) => {
    if (cents === null) {
      const removed = await deleteBudget(tx, s.scope, s.targetId);
      if (removed?.over_month && removed.holder_connection_id)
        await releaseHolder(ctx, tx, removed.holder_connection_id, month, at, "budget_removed", {
          label: s.label,
          link: `${ctx.config.publicUrl}${s.path}`,
        });
      return;
    }
    await upsertBudget(tx, { scope: s.scope, targetId: s.targetId, cents, setBy: setterOf(actor), at });
    const row = await lockBudget(tx, s.scope, s.targetId);
    if (row) await applyBudget(ctx, tx, s, row, spend.byConnection, spend.cents, month, at);
  });
  budgetChanges(ctx).count++;
  if (cents !== null)
    await reconcileRunning(db, {
      scope: s.scope,
      targetId: s.targetId,
      month: month.label,
      cents: spend.cents,
      seen,
      at,
    });
  return budgetFigures(cents, spend.cents, month, at);
}

/** The caller's access to the subject is checked before. */
async function getBudget(ctx: AppContext, s: BudgetSubject): Promise<BudgetFigures> {
  const at = ctx.now();
  const month = monthOf(at);
  const [row, spend] = await Promise.all([
    selectBudget(ctx.stores.db, s.scope, s.targetId),
    subjectSpend(ctx, reader, s, month, at),
  ]);
  return budgetFigures(row?.monthly_budget_cents ?? null, spend.cents, month, at);
}

/** GET /v1/connections/{id}/budget: 404 when the connection does not exist, 403 when the caller cannot see it. */
export async function getConnectionBudget(
  ctx: AppContext,
  actor: Actor,
  connectionId: string,
): Promise<ConnectionBudget> {
  await requireAccess(ctx.stores.db, actor, connectionId);
  const s = await connectionSubject(ctx, connectionId);
  if (!s) throw connectionNotFound();
  return { connection_id: connectionId, ...(await getBudget(ctx, s)) };
}

/** PUT /v1/connections/{id}/budget: anyone who may manage the connection. */
export async function setConnectionBudget(
  ctx: AppContext,
  actor: Actor,
  connectionId: string,
  usd: number | null,
): Promise<ConnectionBudget> {
  const p = asManager(actor);
  await requireAccess(ctx.stores.db, p, connectionId);
  const s = await connectionSubject(ctx, connectionId);
  if (!s) throw connectionNotFound();
  return { connection_id: connectionId, ...(await putBudget(ctx, p, s, usd === null ? null : toCents(usd))) };
}

async function accountBudgetOf(ctx: AppContext, actor: Actor) {
  const account = accountOf(actor);
  const s = await accountSubject(ctx, account);
  if (!s) throw forbidden("The key's account no longer exists");
  return { account, s };
}

const accountFields = (account: Account, s: BudgetSubject) => ({
  account_type: account.scope,
  account_id: account.id,
  connection_count: s.connections.length,
});

/** GET /v1/budget: the caller's account's budget and the month's spend over its connections. */
export async function getAccountBudget(ctx: AppContext, actor: Actor): Promise<AccountBudget> {
  const { account, s } = await accountBudgetOf(ctx, actor);
  return { ...accountFields(account, s), ...(await getBudget(ctx, s)) };
}

/**
 * PUT /v1/budget: a personal key (or signed-in user) sets its user's budget; an organization key
 * sets the organization's, and only when its user is an admin or owner there (403 otherwise).
 */
export async function setAccountBudget(
  ctx: AppContext,
  actor: Actor,
  usd: number | null,
): Promise<AccountBudget> {
  const p = asManager(actor);
  const { account, s } = await accountBudgetOf(ctx, p);
  if (account.scope === "organization") {
    const role = await roleIn(ctx.stores.db, p.userId, account.id);
    if (role !== "admin" && role !== "owner")
      throw forbidden(
        `Only an organization's admins and owners may set its budget; this key's user is ${role ? `a ${role}` : "not a member"}`,
      );
  }
  return {
    ...accountFields(account, s),
    ...(await putBudget(ctx, p, s, usd === null ? null : toCents(usd))),
  };
}

export type { BudgetScope };
