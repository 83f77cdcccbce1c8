import { availabilityByDay } from "../availability/totals.js";
import type { AppContext } from "../core/context.js";
import { dayStart } from "../retention/rollups.js";
import type { SloRow } from "./repository.js";

/**
 * The burn-down of an SLO's error budget: the share of the budget left at the end of each UTC day
 * of the window (docs/dashboard.md: Connections; the dashboard draws it on a connection's page).
 *
 * The budget is the one `sloStatus` answers at the same instant: (1 − objective) × the window's
 * checks so far (window_start … `at`, maintenance left out). Each day's point is
 *
 *     remaining(d) = 1 − (failed checks from window_start to the end of d) / budget
 *
 * so the line starts at 1 (before the window's first failure), steps down on exactly the days
 * that had failures, never rises, and its last point (today, up to `at`) is `error_budget.remaining`.
 * The denominator is the same for every point on purpose: dividing each day by the checks up to
 * that day would make the line rise on good days (it would plot the SLI so far, not what is left
 * to spend), and projecting the whole window's checks would disagree with the figure printed
 * beside the chart. Past days therefore move a little as the window's checks grow, as the budget
 * itself does. Without a check in the window nothing is consumed and every point is 1.
 *
 * Day totals come from `availabilityByDay`, as sloStatus reads them: daily rollups past raw
 * retention, raw samples for today and for days marked dirty, on every series store.
 */

const DAY_MS = 86_400_000;

export interface BurndownPoint {
  /** The UTC day, YYYY-MM-DD. */
  day: string;
  /** That day's checks and failed checks (maintenance left out). */
  checks: number;
  failed: number;
  /** The share of the budget left at the day's end (today: at `at`); below 0 once overspent. */
  remaining: number;
}

export interface Burndown {
  connection_id: string;
  window_start: string;
  /** The window's checks and failures so far; the budget is (1 − objective) × checks. */
  checks: number;
  failed: number;
  /** One point per UTC day from window_start to today, oldest first (`window_days` points). */
  points: BurndownPoint[];
}

/** Rounded as sloStatus rounds, so the last point equals `error_budget.remaining` to the digit. */
const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** The burn-down of `slo` at `at` (see the module comment for the definition). */
export async function sloBurndown(
  ctx: AppContext,
  slo: Pick<SloRow, "connection_id" | "objective" | "window_days">,
  at: Date,
): Promise<Burndown> {
  const allowed = 1 - slo.objective;
  const today = dayStart(at).getTime();
  // the window as sloStatus takes it: window_days whole UTC days, today included
  const windowStart = new Date(today - (slo.window_days - 1) * DAY_MS);
  await ctx.stores.series.waitVisible();
  const rows = await availabilityByDay(
    ctx,
    { column: "connection_id", op: "eq", value: slo.connection_id },
    windowStart,
    at,
    "day",
  );
  const byDay = new Map<number, { checks: number; failed: number }>();
  for (const r of rows) {
    const k = dayStart(r.bucket).getTime();
    const d = byDay.get(k) ?? { checks: 0, failed: 0 };
    d.checks += r.checks;
    d.failed += r.checks - r.available;
    byDay.set(k, d);
  }
  let checks = 0;
  let failed = 0;
  for (const d of byDay.values()) {
    checks += d.checks;
    failed += d.failed;
  }
  const points: BurndownPoint[] = [];
  let spent = 0;
  for (let k = windowStart.getTime(); k <= today; k += DAY_MS) {
    const d = byDay.get(k) ?? { checks: 0, failed: 0 };
    spent += d.failed;
    // the same expression sloStatus evaluates, so the last point is its figure exactly
    const consumed = checks > 0 ? spent / (allowed * checks) : 0;
    points.push({
      day: new Date(k).toISOString().slice(0, 10),
      checks: d.checks,
      failed: d.failed,
      remaining: round(1 - consumed),
    });
  }
  return {
    connection_id: slo.connection_id,
    window_start: windowStart.toISOString(),
    checks,
    failed,
    points,
  };
}
