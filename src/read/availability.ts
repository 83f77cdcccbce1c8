import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { connectionScope } from "../usage/scope.js";
import type { availabilityQuery, summaryQuery } from "./schemas.js";
import { emptyPage, seriesPage } from "./series-page.js";
import { retainedScope } from "../retention/policy.js";
import {
  availabilityByDay,
  type AvailabilityTotals,
  availabilityTotals,
  dayStart,
} from "../retention/rollups.js";

const DAY_MS = 86_400_000;

/** The availability sample row of the read API. */
export function toSample(r: RowOf<typeof availabilitySamples>) {
  return {
    connection_id: r.connection_id,
    checked_at: r.ts.toISOString(),
    available: r.available,
    response_time_ms: r.response_time_ms ?? null,
    status_code: r.status_code ?? null,
    reason: r.reason ?? null,
    error: r.error ?? null,
    synthetic: r.synthetic,
    source: r.source,
  };
}

export function listAvailability(ctx: AppContext, p: Principal, q: z.output<typeof availabilityQuery>) {
  const filters: Filter[] = [];
  if (q.is_available !== undefined) filters.push({ column: "available", op: "eq", value: q.is_available });
  if (!q.include_synthetic) filters.push({ column: "synthetic", op: "eq", value: false });
  // never a sample older than the connection's plan keeps, even before the retention job ran
  return seriesPage(ctx, p, availabilitySamples, "availability", q, filters, toSample, (scope) =>
    retainedScope(ctx.stores.db, scope, ctx.now()),
  );
}

/**
 * Per connection: checks, available checks, uptime percent and average response time over the
 * window. `day` is the last 24 hours, from raw samples. `week` and `month` are the last 7 and 30
 * UTC days, today included so far: days already rolled up from the daily rollup (kept 425 days,
 * so the summary outlives raw samples), the rest from raw samples.
 */
export async function availabilitySummary(ctx: AppContext, p: Principal, q: z.output<typeof summaryQuery>) {
  const scope = await connectionScope(ctx, p, q.connection_id);
  if (!scope) return emptyPage(0);
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
  const data = [...totals]
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
  return { data, pagination: { next_cursor: null, has_more: false, limit: data.length } };
}
