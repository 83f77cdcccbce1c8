import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { dayStart } from "../retention/rollups.js";
import { availabilityByDay, type AvailabilityTotals, availabilityTotals } from "./totals.js";
import { availabilitySamples } from "../stores/series/tables.js";
import { connectionScope } from "../connections/scope.js";

const DAY_MS = 86_400_000;

export type SummaryWindow = "day" | "week" | "month";

/** One connection's availability over the window. */
export interface AvailabilitySummaryRow {
  connection_id: string;
  window: SummaryWindow;
  since: string;
  until: string;
  checks: number;
  available_checks: number;
  /** Percent of checks available, to 3 decimals. */
  uptime_percent: number;
  /** Milliseconds to 1 decimal; null when no check measured one. */
  avg_response_time_ms: number | null;
}

/**
 * Per connection (ordered by id; connections without checks left out): checks, available
 * checks, uptime percent and average response time over the window. `day` is the last 24 hours,
 * from raw samples. `week` and `month` are the last 7 and 30 UTC days, today included so far:
 * days already rolled up from the daily rollup (kept 425 days, so the summary outlives raw
 * samples), the rest from raw samples.
 */
export async function availabilitySummary(
  ctx: AppContext,
  actor: Actor,
  q: { connectionId?: string; window: SummaryWindow },
): Promise<AvailabilitySummaryRow[]> {
  const scope = await connectionScope(ctx, actor, q.connectionId);
  if (!scope) return [];
  const until = ctx.now();
  let since: Date;
  let parts: AvailabilityTotals[];
  if (q.window === "day") {
    // raw samples: every plan keeps at least 7 days, so no retention horizon applies
    since = new Date(until.getTime() - DAY_MS);
    parts = await availabilityTotals(ctx, availabilitySamples, scope, since, until, "all");
  } else {
    since = new Date(dayStart(until).getTime() - (q.window === "week" ? 6 : 29) * DAY_MS);
    parts = await availabilityByDay(ctx, scope, since, until, "all");
  }
  const totals = new Map<string, { checks: number; up: number; rs: number; rn: number }>();
  for (const r of parts) {
    const e = totals.get(r.connection_id) ?? { checks: 0, up: 0, rs: 0, rn: 0 };
    e.checks += r.checks;
    e.up += r.available;
    e.rs += r.response_ms_sum;
    e.rn += r.response_ms_count;
    totals.set(r.connection_id, e);
  }
  return [...totals]
    .filter(([, e]) => e.checks > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([connection_id, e]) => ({
      connection_id,
      window: q.window,
      since: since.toISOString(),
      until: until.toISOString(),
      checks: e.checks,
      available_checks: e.up,
      uptime_percent: Math.round((e.up / e.checks) * 100_000) / 1000,
      avg_response_time_ms: e.rn ? Math.round((e.rs / e.rn) * 10) / 10 : null,
    }));
}
