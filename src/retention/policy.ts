import type { RelationalStore } from "../stores/relational/types.js";
import type { ExpiryRule, Filter } from "../stores/series/types.js";
import { PLANS, type Plan, RAW_RETENTION_DAYS } from "../identity/plans.js";
import { selectConnectionPlans } from "./repository.js";

const DAY_MS = 86_400_000;

/** Daily rollups are kept at least this long (the QuestDB table keeps 14 whole months). */
export const DAILY_ROLLUP_DAYS = 425;
/** Monthly rollups are kept at least this many years (the QuestDB table keeps 6 whole years). */
export const MONTHLY_ROLLUP_YEARS = 6;
/**
 * How late a sample may be committed after its own time and still be counted by the rollup
 * without marking its day dirty: a run rolls up only what lies this far behind it (its
 * watermark), and a sample committed more than this after its time marks its day, so the day is
 * read from raw samples until the next run has counted it (availability/samples.ts). Covers a
 * probe check's timeout and batching and a heartbeat's trip many times over.
 */
export const ROLLUP_LATENESS_MS = 10 * 60_000;
/** The longest raw retention of any plan: what a connection unknown to Postgres never exceeds. */
export const MAX_RAW_RETENTION_DAYS = Math.max(...Object.values(RAW_RETENTION_DAYS));

/** The plan of each connection's account (the organization's for an organization connection). */
export async function connectionPlans(
  db: RelationalStore,
  ids?: readonly string[],
): Promise<Map<string, Plan>> {
  return new Map((await selectConnectionPlans(db, ids)).map((row) => [row.id, row.plan]));
}

/** The oldest raw sample a plan still shows at `now`. */
export const rawHorizon = (plan: Plan, now: Date) =>
  new Date(now.getTime() - RAW_RETENTION_DAYS[plan] * DAY_MS);

/**
 * The scope filter of a raw-sample read narrowed to what each connection's plan keeps: samples
 * older than the plan's raw retention are never returned, even before the retention job has
 * removed them.
 */
export async function retainedScope(db: RelationalStore, scope: Filter, now: Date): Promise<Filter> {
  const ids = scope.op === "eq" ? [String(scope.value)] : scope.op === "in" ? scope.value.map(String) : null;
  if (!ids) return scope;
  const plans = await connectionPlans(db, ids);
  const byPlan = new Map<Plan, string[]>();
  for (const id of ids) {
    const plan = plans.get(id) ?? "free";
    byPlan.set(plan, [...(byPlan.get(plan) ?? []), id]);
  }
  return {
    column: "connection_id",
    op: "inSince",
    groups: [...byPlan].map(([plan, values]) => ({ values, since: rawHorizon(plan, now) })),
  };
}

/**
 * Expiry rules for raw availability samples: for each plan's retention, rows older than it expire
 * unless their connection's plan keeps them longer. Connections that no longer exist keep nothing
 * beyond the shortest retention.
 */
export async function rawExpiryRules(db: RelationalStore, now: Date): Promise<ExpiryRule[]> {
  const plans = await connectionPlans(db);
  const days = [...new Set(PLANS.map((p) => RAW_RETENTION_DAYS[p]))].sort((a, b) => a - b);
  return days.map((d) => ({
    before: new Date(now.getTime() - d * DAY_MS),
    keep: [...plans].filter(([, plan]) => RAW_RETENTION_DAYS[plan] > d).map(([id]) => id),
  }));
}
