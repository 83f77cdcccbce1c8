import { systemActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { applyBudget, type Evaluation, releaseHolder } from "./evaluate.js";
import { monthOf } from "./month.js";
import {
  type BudgetRow,
  deleteRunningBefore,
  deleteWarningsBefore,
  lockBudget,
  reconcileRunning,
  selectDueBudgets,
  selectRunning,
  selectUnheldBudgetIncidents,
} from "./repository.js";
import { subjectOf, subjectSpend } from "./budgets.js";
import { budgetEvaluations } from "../lib/metrics.js";

/**
 * Bounds of one run. Budgets are taken least recently evaluated first, and the run stops taking
 * more once it has read `connections` connections' spend (a connection counted by two budgets,
 * its own and its account's, is read for each) (at least one budget is evaluated per
 * run, however many connections its account has); what does not fit is first in line next run.
 */
export const BUDGET_RUN_LIMITS = { budgets: 500, connections: 2_000, sweep: 200 };

/** Warnings are remembered for this many months (then deleted), long past their month. */
const KEEP_WARNING_MONTHS = 13;

export interface BudgetRun {
  evaluated: number;
  warned: number;
  opened: number;
  resolved: number;
}

/**
 * Evaluates one budget against the store's spend of the current month, in a transaction that
 * holds the budget's row (so evaluations of one budget, from the job or from any process's
 * watch, take turns and each warning is decided once), then sets the budget's running total
 * (watch.ts) to that spend plus what processes added meanwhile. Its moment is taken after the
 * running total is read, so nothing added in between is lost; an evaluation whose moment is older
 * than the budget's last one changes nothing (figures read earlier never undo what newer ones
 * decided). Undefined when the budget's connection or account is gone; null when the budget
 * went meanwhile or a newer evaluation came first. `read` counts the connections whose spend
 * was read (the job's bound per run).
 */
export async function evaluateBudget(
  ctx: AppContext,
  due: Pick<BudgetRow, "scope" | "target_id">,
  read?: { connections: number },
): Promise<Evaluation | null | undefined> {
  const db = ctx.stores.db;
  const s = await subjectOf(ctx, due);
  if (!s) return undefined;
  // rows acknowledged to a writer are counted (QuestDB applies its write-ahead log shortly after)
  await ctx.stores.series.waitVisible();
  const seenMonth = monthOf(ctx.now()).label;
  const seen = (await selectRunning(db, due.scope, due.target_id, seenMonth)) ?? 0;
  const at = ctx.now();
  const month = monthOf(at);
  const spend = await subjectSpend(ctx, systemActor("budgets"), s, month, at);
  budgetEvaluations.inc();
  if (read) read.connections += s.connections.length;
  const e = await db.transaction(async (tx) => {
    const row = await lockBudget(tx, due.scope, due.target_id);
    if (!row || (row.checked_at && new Date(row.checked_at).getTime() > at.getTime())) return null;
    return applyBudget(ctx, tx, s, row, spend.byConnection, spend.cents, month, at);
  });
  if (e !== null)
    await reconcileRunning(db, {
      scope: due.scope,
      targetId: due.target_id,
      month: month.label,
      cents: spend.cents,
      seen: seenMonth === month.label ? seen : 0,
      at,
    });
  return e;
}

/**
 * The budget job, one run (every 5 minutes, under its lock; jobs/jobs.ts), at `ctx.now()`:
 * evaluates the due budgets against the UTC month's spend (warnings at 50, 80, 100% and a
 * projected overrun, each once per month; the `budget` incident opened at 100% and resolved
 * below it), then resolves `budget` incidents no budget holds any more (last month's, a budget
 * removed or raised), then forgets warnings older than 13 months.
 */
export async function runBudgetChecks(ctx: AppContext, limits = BUDGET_RUN_LIMITS): Promise<BudgetRun> {
  const db = ctx.stores.db;
  const at = ctx.now();
  const month = monthOf(at);
  const run: BudgetRun = { evaluated: 0, warned: 0, opened: 0, resolved: 0 };
  const read = { connections: 0 };

  for (const due of await selectDueBudgets(db, limits.budgets)) {
    if (run.evaluated > 0 && read.connections >= limits.connections) break;
    const e = await evaluateBudget(ctx, due, read);
    if (e === undefined) continue; // its connection or account went (the row goes with it)
    run.evaluated++;
    if (!e) continue;
    run.warned += e.warned.length;
    if (e.opened) run.opened++;
    if (e.resolved) run.resolved++;
  }

  for (const c of await selectUnheldBudgetIncidents(db, month.label, limits.sweep)) {
    const because = new Date(c.opened_at) < month.start ? "new_month" : "within_budget";
    const resolved = await db.transaction((tx) => releaseHolder(ctx, tx, c.id, month, at, because));
    if (resolved) run.resolved++;
  }

  const y = month.start.getUTCFullYear();
  const m = month.start.getUTCMonth();
  await deleteWarningsBefore(db, monthOf(new Date(Date.UTC(y, m - KEEP_WARNING_MONTHS, 1))).label);
  await deleteRunningBefore(db, month.label);
  if (run.warned || run.opened || run.resolved) ctx.log.info({ job: "budgets", ...run }, "budgets checked");
  return run;
}
