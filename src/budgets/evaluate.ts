/**
 * The budget detector's decision for one budget, in the caller's transaction: which warnings
 * are due (each once per budget and month), and whether the budget's `budget` incident opens or
 * resolves. The job (job.ts) and a change of the budget (budgets.ts) both call it, so a budget
 * set below the month's spend warns and opens at once, and one raised above it resolves at once.
 *
 * The incident belongs to a connection (incidents are per connection): a connection budget's to
 * that connection; an account budget's to the account's connection that had spent the most when
 * the budget was reached (its "holder", kept for the month). A connection's one `budget`
 * incident stays open while any budget it holds is over in the current month.
 */

import type { AppContext } from "../core/context.js";
import { type IncidentTarget, openIncident, resolveIncident } from "../incidents/incidents.js";
import { enqueueNotifications, recipients } from "../incidents/repository.js";
import type { Queryable } from "../stores/relational/types.js";
import { type BudgetFacts, overBudgetMail, type ResolvedBecause, resolvedMail, warningMail } from "./mail.js";
import { MIN_PROJECTION_MS, type Month, projectToMonthEnd } from "./month.js";
import {
  type BudgetRow,
  type BudgetScope,
  type ConnectionRef,
  holdsBudgetIncident,
  recordEvaluation,
  recordWarnings,
  selectConnectionRef,
  unresolvedBudgetIncident,
  type WarningLevel,
} from "./repository.js";
import { centsToUsd } from "./spend.js";

/** The thresholds, in percent of the budget. */
export const THRESHOLDS = [50, 80, 100] as const;

/** Whose budget it is, and the connections whose spend counts (one for a connection budget). */
export interface BudgetSubject {
  scope: BudgetScope;
  targetId: string;
  /** How e-mails name it. */
  label: string;
  /** Path of its endpoint, for e-mail links. */
  path: string;
  /** Who is told: the connection's or the account's owner, or an organization's owners and admins. */
  account: { userId: string; organizationId: string | null };
  connections: ConnectionRef[];
}

/** The month's figures of a budget, as the endpoints answer them. */
export interface BudgetFigures {
  monthly_budget_usd: number | null;
  month: string;
  spent_usd: number;
  percent_used: number | null;
  projected_usd: number;
}

export function budgetFigures(budgetCents: number | null, spentCents: number, month: Month, at: Date) {
  const spentUsd = centsToUsd(spentCents);
  return {
    monthly_budget_usd: budgetCents === null ? null : budgetCents / 100,
    month: month.label,
    spent_usd: spentUsd,
    percent_used: budgetCents === null ? null : Math.round((spentCents / budgetCents) * 10_000) / 100,
    projected_usd: Math.round(projectToMonthEnd(spentUsd, month, at) * 100) / 100,
  } satisfies BudgetFigures;
}

const targetOf = (c: ConnectionRef): IncidentTarget => ({
  connectionId: c.id,
  connectionName: c.service_name,
  userId: c.user_id,
  organizationId: c.organization_id,
});

export interface Evaluation {
  /** Warnings queued (levels), the 100% one included when it went out with the incident. */
  warned: WarningLevel[];
  opened: string | null;
  resolved: string | null;
}

/**
 * Evaluates one budget whose row the caller holds (locked or just written) in `tx`, against the
 * month's spend (cents per connection, read before the transaction).
 */
export async function applyBudget(
  ctx: AppContext,
  tx: Queryable,
  s: BudgetSubject,
  row: BudgetRow,
  spend: Map<string, number>,
  spentCents: number,
  month: Month,
  at: Date,
): Promise<Evaluation> {
  const out: Evaluation = { warned: [], opened: null, resolved: null };
  const budget = row.monthly_budget_cents;
  // the connection alerts are filed under: the one that has spent most (the first on a tie)
  let top: ConnectionRef | undefined;
  for (const c of s.connections) if (!top || (spend.get(c.id) ?? 0) > (spend.get(top.id) ?? 0)) top = c;

  const fig = budgetFigures(budget, spentCents, month, at);
  const facts: BudgetFacts = {
    label: s.label,
    month: month.label,
    budgetUsd: budget / 100,
    spentUsd: fig.spent_usd,
    percentUsed: fig.percent_used ?? 0,
    projectedUsd: fig.projected_usd,
    link: `${ctx.config.publicUrl}${s.path}`,
  };
  const over = top !== undefined && spentCents >= budget;
  const projecting =
    top !== undefined &&
    !over &&
    at.getTime() - month.start.getTime() >= MIN_PROJECTION_MS &&
    projectToMonthEnd(spentCents, month, at) > budget;
  const levels: WarningLevel[] = [];
  if (top !== undefined)
    for (const pct of THRESHOLDS)
      if (spentCents >= (budget * pct) / 100) levels.push(String(pct) as WarningLevel);
  if (projecting) levels.push("projected");

  const fresh = levels.length
    ? await recordWarnings(tx, {
        scope: s.scope,
        targetId: s.targetId,
        month: month.label,
        levels,
        connectionId: top?.id ?? null,
        budgetCents: budget,
        spentCents,
        at,
      })
    : [];
  const to = fresh.length ? await recipients(tx, s.account) : [];
  const warn = async (mail: { subject: string; body: string }, incidentId: string | null = null) => {
    if (!top) return;
    // the budget's account owns the alert (an account budget's is the account's, not only its holder's)
    await enqueueNotifications(tx, {
      kind: "budget_warning",
      account: s.account,
      connectionId: top.id,
      incidentId,
      recipients: to,
      ...mail,
      at,
    });
  };
  // Every threshold crossed is an alert of its own, also when one request or a budget set below
  // the spend crosses several at once (docs/api.md: Budgets): 50 and 80 here, 100 with the incident.
  for (const threshold of ["50", "80"] as const)
    if (fresh.includes(threshold)) {
      await warn(warningMail(threshold, facts));
      out.warned.push(threshold);
    }
  if (fresh.includes("projected")) {
    await warn(warningMail("projected", facts));
    out.warned.push("projected");
  }

  // The incident: kept on its holder for the month; a new month or a new holder releases the old one.
  const previous = row.over_month ? row.holder_connection_id : null;
  const kept =
    over && previous && row.over_month === month.label
      ? s.connections.find((c) => c.id === previous)
      : undefined;
  const holder = over ? (kept ?? top) : undefined;
  if (previous && (previous !== holder?.id || row.over_month !== month.label)) {
    await recordEvaluation(tx, { scope: s.scope, targetId: s.targetId, overMonth: null, holder: null, at });
    const because: ResolvedBecause = row.over_month !== month.label ? "new_month" : "within_budget";
    out.resolved = await releaseHolder(ctx, tx, previous, month, at, because, {
      label: s.label,
      link: facts.link,
    });
  }
  await recordEvaluation(tx, {
    scope: s.scope,
    targetId: s.targetId,
    overMonth: holder ? month.label : null,
    holder: holder?.id ?? null,
    at,
  });
  // Opened when the budget becomes over (edge-triggered): an incident a person closed is not reopened.
  if (holder && !kept) {
    const mail = overBudgetMail(facts);
    out.opened = await openIncident(tx, targetOf(holder), {
      kind: "budget",
      title: `${s.label} is over its monthly budget (${month.label})`,
      detail: {
        scope: s.scope,
        target_id: s.targetId,
        month: month.label,
        monthly_budget_usd: facts.budgetUsd,
        spent_usd: facts.spentUsd,
        percent_used: facts.percentUsed,
        summary: `spent $${facts.spentUsd.toFixed(2)} of $${facts.budgetUsd.toFixed(2)} in ${month.label}`,
      },
      at,
      publicUrl: ctx.config.publicUrl,
      mail,
    });
    if (fresh.includes("100")) {
      // The 100% warning is the incident's opening e-mail; when the holder's incident was open
      // already (another budget it holds), it goes out on its own, tied to that incident.
      if (!out.opened) {
        const open = await unresolvedBudgetIncident(tx, holder.id);
        await warn(mail, open?.id ?? null);
      }
      out.warned.push("100");
    }
  }
  return out;
}

/**
 * Resolves the connection's `budget` incident unless another budget over in `month` still holds
 * it. Returns the resolved incident's id, or null.
 */
export async function releaseHolder(
  ctx: AppContext,
  tx: Queryable,
  connectionId: string,
  month: Month,
  at: Date,
  because: ResolvedBecause,
  /** How the e-mail names the budget; by default the connection's own. */
  named?: { label: string; link: string },
): Promise<string | null> {
  if (await holdsBudgetIncident(tx, connectionId, month.label)) return null;
  const c = await selectConnectionRef(tx, connectionId);
  if (!c) return null;
  const name = named ?? {
    label: c.service_name,
    link: `${ctx.config.publicUrl}/v1/connections/${c.id}/budget`,
  };
  return resolveIncident(tx, targetOf(c), {
    kind: "budget",
    detail: { reason: because, month: month.label },
    at,
    publicUrl: ctx.config.publicUrl,
    mail: resolvedMail(name.label, because, name.link),
  });
}
