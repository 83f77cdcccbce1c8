import { systemActor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { applyBudget, type Evaluation, releaseHolder } from "./evaluate.js";
import { type Month, monthOf } from "./month.js";
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

/**
 * Bounds of one run. Budgets are taken least recently evaluated first, and the run stops taking
 * more once it has read `connections` connections' spend (at least one budget is evaluated per
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
 * Evaluates one budget against the store's spend of `month` up to `at`, in a transaction that
 * holds the budget's row (so evaluations of one budget, from the job or from any process's
 * watch, take turns and each warning is decided once), then sets the budget's running total
 * (watch.ts) to that spend. Undefined when the budget's connection or account is gone; null when
 * the budget itself went meanwhile.
 */
export async function evaluateBudget(
  ctx: AppContext,
  due: Pick<BudgetRow, "scope" | "target_id">,
  month: Month,
  at: Date,
  cache?: Map<string, number>,
): Promise<Evaluation | null | undefined> {
  const db = ctx.stores.db;
  const s = await subjectOf(ctx, due);
  if (!s) return undefined;
  const seen = (await selectRunning(db, due.scope, due.target_id, month.label)) ?? 0;
  const spend = await subjectSpend(ctx, systemActor("budgets"), s, month, at, cache);
  const e = await db.transaction(async (tx) => {
    const row = await lockBudget(tx, due.scope, due.target_id);
    return row ? applyBudget(ctx, tx, s, row, spend.byConnection, spend.cents, month, at) : null;
  });
  if (e !== null)
    await reconcileRunning(db, {
      scope: due.scope,
      targetId: due.target_id,
      month: month.label,
      cents: spend.cents,
      seen,
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
  const cache = new Map<string, number>();

  for (const due of await selectDueBudgets(db, limits.budgets)) {
    if (run.evaluated > 0 && cache.size >= limits.connections) break;
    const e = await evaluateBudget(ctx, due, month, at, cache);
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
