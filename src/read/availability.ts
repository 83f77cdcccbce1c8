import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { connectionScope } from "../usage/scope.js";
import type { availabilityQuery, summaryQuery } from "./schemas.js";
import { emptyPage, seriesPage } from "./series-page.js";

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
  return seriesPage(ctx, p, availabilitySamples, "availability", q, filters, toSample);
}

const WINDOW_MS = { day: 86_400_000, week: 7 * 86_400_000, month: 30 * 86_400_000 } as const;

/** Per connection: checks, available checks, uptime percent and average response time over the window. */
export async function availabilitySummary(ctx: AppContext, p: Principal, q: z.output<typeof summaryQuery>) {
  const scope = await connectionScope(ctx, p, q.connection_id);
  if (!scope) return emptyPage(0);
  const until = ctx.now();
  const since = new Date(until.getTime() - WINDOW_MS[q.window]);
  const rows = await ctx.stores.series.aggregate(availabilitySamples, {
    bucket: "all",
    where: [scope],
    since,
    until,
    groupBy: ["connection_id"],
    measures: {
      checks: { fn: "count" },
      up: { fn: "countTrue", column: "available" },
      avg_ms: { fn: "avg", column: "response_time_ms" },
    },
  });
  const data = rows.map((r) => {
    const checks = Number(r.checks ?? 0);
    const up = Number(r.up ?? 0);
    return {
      connection_id: String(r.connection_id),
      window: q.window,
      since: since.toISOString(),
      until: until.toISOString(),
      checks,
      available_checks: up,
      uptime_percent: checks ? Math.round((up / checks) * 100_000) / 1000 : null,
      avg_response_time_ms: r.avg_ms === null ? null : Math.round(Number(r.avg_ms) * 10) / 10,
    };
  });
  return { data, pagination: { next_cursor: null, has_more: false, limit: data.length } };
}
