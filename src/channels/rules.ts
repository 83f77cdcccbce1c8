import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, invalidInput, notFound, ServiceError } from "../core/errors.js";
import { connectionAccess } from "../identity/visibility.js";
import { type AlertAccount, managedAccount, readableAccount } from "../notifications/account.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  connectionAccounts,
  deleteRuleRow,
  insertRule,
  lockAlertAccount,
  type RuleRow,
  selectAccountChannels,
  selectAccountRule,
  selectAccountRules,
  selectAlertEmail,
  updateAlertEmail,
  updateRuleRow,
} from "./repository.js";
import type { RuleBody } from "./schema.js";

/**
 * Routing rules (docs/channels.md; the decision itself is routing.ts): per account, each picks
 * channels by alert kind and connection, says whether recoveries are sent, and may escalate an
 * incident nobody acknowledged to other channels after N minutes, repeating every M.
 */

export const MAX_RULES_PER_ACCOUNT = 50;
const WHAT = "routing rules";

export interface RoutingRule {
  id: string;
  channel_ids: string[];
  kinds: string[] | null;
  connection_ids: string[] | null;
  send_recoveries: boolean;
  escalate_after_minutes: number | null;
  repeat_every_minutes: number | null;
  escalation_channel_ids: string[];
  organization_id: string | null;
  created_at: string;
  updated_at: string;
}

const shown = (r: RuleRow): RoutingRule => ({
  id: r.id,
  channel_ids: r.channel_ids,
  kinds: r.kinds,
  connection_ids: r.connection_ids,
  send_recoveries: r.send_recoveries,
  escalate_after_minutes: r.escalate_after_minutes === null ? null : Number(r.escalate_after_minutes),
  repeat_every_minutes: r.repeat_every_minutes === null ? null : Number(r.repeat_every_minutes),
  escalation_channel_ids: r.escalation_channel_ids,
  organization_id: r.organization_id,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Checks a rule's references: its channels are the account's, its connections ones the caller sees in the account. */
async function checkRefs(tx: Queryable, actor: Actor, account: AlertAccount, b: RuleBody) {
  const own = new Set((await selectAccountChannels(tx, account)).map((c) => c.id));
  const check = (ids: string[], field: string) =>
    ids.forEach((id, i) => {
      if (!own.has(id))
        throw invalidInput(
          `body.${field}.${i}`,
          `names no channel of this account (${id}); see GET /v1/channels`,
        );
    });
  if (b.channel_ids.length === 0 && b.escalation_channel_ids.length === 0)
    throw invalidInput("body.channel_ids", "must name at least one channel (GET /v1/channels)");
  check(b.channel_ids, "channel_ids");
  check(b.escalation_channel_ids, "escalation_channel_ids");
  if (b.escalate_after_minutes !== null && b.escalation_channel_ids.length === 0)
    throw invalidInput(
      "body.escalation_channel_ids",
      "must name at least one channel when escalate_after_minutes is set",
    );
  if (b.escalate_after_minutes === null && b.escalation_channel_ids.length > 0)
    throw invalidInput(
      "body.escalate_after_minutes",
      "is required when escalation_channel_ids names channels",
    );
  if (b.repeat_every_minutes !== null && b.escalate_after_minutes === null)
    throw invalidInput(
      "body.repeat_every_minutes",
      "needs escalate_after_minutes: reminders repeat an escalation",
    );
  const owners = await connectionAccounts(tx, b.connection_ids ?? []);
  for (const [i, id] of (b.connection_ids ?? []).entries()) {
    // inside the transaction: a query on ctx.stores.db would wait for it (PGlite has one connection)
    const field = `body.connection_ids.${i}`;
    const access = await connectionAccess(tx, actor, id);
    if (access === "absent")
      throw new ServiceError("not_found", `${field}: connection ${id} not found`, { field });
    if (access === "forbidden")
      throw new ServiceError("forbidden", `${field}: no access to connection ${id}`, { field });
    const c = owners.get(id);
    const inAccount =
      account.scope === "organization"
        ? c?.organization_id === account.id
        : c?.organization_id === null && c.user_id === account.id;
    if (!inAccount)
      throw invalidInput(
        `body.connection_ids.${i}`,
        `connection ${id} is not one of this account's connections`,
      );
  }
}

export async function createRule(ctx: AppContext, actor: Actor, b: RuleBody): Promise<RoutingRule> {
  const account = await managedAccount(ctx, actor, WHAT);
  const id = randomUUID();
  const at = ctx.now();
  await ctx.stores.db.transaction(async (tx) => {
    await checkRefs(tx, actor, account, b);
    await lockAlertAccount(tx, account);
    const n = (await selectAccountRules(tx, account)).length;
    if (n >= MAX_RULES_PER_ACCOUNT)
      throw conflict(`An account has at most ${MAX_RULES_PER_ACCOUNT} routing rules and this one has ${n}`);
    await insertRule(tx, { id, account, at, ...b });
  });
  const row = await selectAccountRule(ctx.stores.db, account, id);
  return shown(row as RuleRow);
}

export async function listRules(ctx: AppContext, actor: Actor): Promise<{ routing_rules: RoutingRule[] }> {
  return {
    routing_rules: (await selectAccountRules(ctx.stores.db, await readableAccount(ctx, actor, WHAT))).map(
      shown,
    ),
  };
}

export async function getRule(ctx: AppContext, actor: Actor, id: string): Promise<RoutingRule> {
  const r = await selectAccountRule(ctx.stores.db, await readableAccount(ctx, actor, WHAT), id);
  if (!r) throw notFound(`Routing rule ${id} not found`);
  return shown(r);
}

/** PUT /v1/routing-rules/{id}: replaces the rule (fields left out take their defaults, as at creation). */
export async function updateRule(
  ctx: AppContext,
  actor: Actor,
  id: string,
  b: RuleBody,
): Promise<RoutingRule> {
  const account = await managedAccount(ctx, actor, WHAT);
  await ctx.stores.db.transaction(async (tx) => {
    if (!(await selectAccountRule(tx, account, id, true))) throw notFound(`Routing rule ${id} not found`);
    await checkRefs(tx, actor, account, b);
    await updateRuleRow(tx, { id, at: ctx.now(), ...b });
  });
  return shown((await selectAccountRule(ctx.stores.db, account, id)) as RuleRow);
}

export async function deleteRule(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const account = await managedAccount(ctx, actor, WHAT);
  await ctx.stores.db.transaction(async (tx) => {
    if (!(await selectAccountRule(tx, account, id, true))) throw notFound(`Routing rule ${id} not found`);
    await deleteRuleRow(tx, id);
  });
  return { id, deleted: true };
}

/** GET/PUT /v1/notification-settings: whether the account's owners get every alert by e-mail. */
export async function getNotificationSettings(
  ctx: AppContext,
  actor: Actor,
): Promise<{ email_owners: boolean }> {
  return { email_owners: await selectAlertEmail(ctx.stores.db, await readableAccount(ctx, actor, WHAT)) };
}

export async function putNotificationSettings(
  ctx: AppContext,
  actor: Actor,
  b: { email_owners: boolean },
): Promise<{ email_owners: boolean }> {
  const account = await managedAccount(ctx, actor, "notification settings");
  await updateAlertEmail(ctx.stores.db, account, b.email_owners);
  return { email_owners: b.email_owners };
}
