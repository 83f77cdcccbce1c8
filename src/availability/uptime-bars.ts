import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { requireReadable } from "../connections/scope.js";
import { connectionsAccess } from "../identity/visibility.js";
import { dayStart, SAMPLE_MEASURES, toRollup } from "../retention/rollups.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { availabilityByDay } from "./totals.js";

/**
 * Read functions of the dashboard's connection views (issue #15): the 90-day uptime bar of each
 * connection in a list, each connection's latest check, and one connection's availability and
 * response time over a range, bucketed for a chart. They read through the same totals as the
 * summary and analytics (availability/totals.ts): days the rollup covers from `availability_daily`,
 * the rest (today, late days) from raw samples, so today's cell is exact from a new connection's
 * first check on, before the rollup job has run.
 */

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** One cell of a bar: a UTC day (or a shorter bucket) and its checks. */
export interface UptimeCell {
  /** Start of the bucket. */
  start: Date;
  /** Checks in the bucket, those under maintenance left out. */
  checks: number;
  available: number;
  /** Checks taken under a maintenance window (docs/maintenance.md): not in checks, available or uptime. */
  maintenance: number;
  /** Mean response time in ms over the bucket; null when no check measured one. */
  avgResponseMs: number | null;
}

/** A connection's bar: `days` cells, oldest first, and the totals over them. */
export interface UptimeBar {
  connectionId: string;
  cells: UptimeCell[];
  checks: number;
  available: number;
  /** Checks under maintenance over the bar (not in checks, available or uptime). */
  maintenance: number;
  /** Percent of checks available, to 3 decimals; null without checks. */
  uptimePercent: number | null;
}

/** Percent to 3 decimals, as the summary rounds it. */
export const uptimePercent = (up: number, checks: number) =>
  checks ? Math.round((up / checks) * 100_000) / 1000 : null;

/** The ids among `ids` the actor may see (others are left out, not an error: a list's ids). */
async function visibleAmong(ctx: AppContext, actor: Actor, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const access = await connectionsAccess(ctx.stores.db, actor, [...new Set(ids)]);
  return [...access].filter(([, a]) => a === "ok").map(([id]) => id);
}

/**
 * The last `days` UTC days (today included, so far) of each visible connection among `ids`: one
 * cell a day, oldest first, days without checks at zero. Connections the actor may not see are
 * left out of the map.
 */
export async function uptimeBars(
  ctx: AppContext,
  actor: Actor,
  ids: readonly string[],
  days = 90,
): Promise<Map<string, UptimeBar>> {
  const visible = await visibleAmong(ctx, actor, ids);
  const out = new Map<string, UptimeBar>();
  if (visible.length === 0) return out;
  const now = ctx.now();
  const first = dayStart(now).getTime() - (days - 1) * DAY_MS;
  const scope: Filter = { column: "connection_id", op: "in", value: visible };
  const rows = await availabilityByDay(ctx, scope, new Date(first), now, "day");
  const grid = new Map<string, UptimeCell[]>();
  for (const id of visible)
    grid.set(
      id,
      Array.from({ length: days }, (_, i) => ({
        start: new Date(first + i * DAY_MS),
        checks: 0,
        available: 0,
        maintenance: 0,
        avgResponseMs: null,
      })),
    );
  const rs = new Map<string, number[]>();
  for (const r of rows) {
    const cells = grid.get(r.connection_id);
    const i = Math.floor((r.bucket.getTime() - first) / DAY_MS);
    const cell = cells?.[i];
    if (!cell) continue;
    // rolled and raw spans do not overlap, but sum anyway: a day is one cell whatever its source
    cell.checks += r.checks;
    cell.available += r.available;
    cell.maintenance += r.maintenance;
    const key = `${r.connection_id}\u0000${i}`;
    const acc = rs.get(key) ?? [0, 0];
    acc[0] = (acc[0] ?? 0) + r.response_ms_sum;
    acc[1] = (acc[1] ?? 0) + r.response_ms_count;
    rs.set(key, acc);
    cell.avgResponseMs = acc[1] ? Math.round((acc[0] / acc[1]) * 10) / 10 : null;
  }
  for (const [id, cells] of grid) {
    let checks = 0;
    let up = 0;
    let maintenance = 0;
    for (const c of cells) {
      checks += c.checks;
      up += c.available;
      maintenance += c.maintenance;
    }
    out.set(id, {
      connectionId: id,
      cells,
      checks,
      available: up,
      maintenance,
      uptimePercent: uptimePercent(up, checks),
    });
  }
  return out;
}

/** A connection's newest check (real or synthetic). */
export interface LatestCheck {
  at: Date;
  available: boolean;
  responseTimeMs: number | null;
}

/** The window the first, shared read of `latestChecks` covers: the longest default check interval and a minute. */
const RECENT_MS = 6 * 60_000;
/** The most rows that shared read takes (50 connections checked every 10 s over 6 minutes: 1,800). */
const RECENT_LIMIT = 5_000;

/**
 * The newest check of each visible connection among `ids` within the last `hours` hours (every
 * plan keeps 7 days of raw samples). One newest-first read of the last 6 minutes for all of them
 * first (a connection checked at any plan's default interval has a sample there); then one
 * single-row read for each connection that read did not reach, sent together. Connections without
 * a check in the window, or not visible, are left out.
 */
export async function latestChecks(
  ctx: AppContext,
  actor: Actor,
  ids: readonly string[],
  hours = 48,
): Promise<Map<string, LatestCheck>> {
  const visible = await visibleAmong(ctx, actor, ids);
  const out = new Map<string, LatestCheck>();
  if (visible.length === 0) return out;
  const until = ctx.now();
  const since = new Date(until.getTime() - hours * HOUR_MS);
  const take = (r: RowOf<typeof availabilitySamples>) => {
    if (!out.has(r.connection_id))
      out.set(r.connection_id, {
        at: r.ts,
        available: r.available,
        responseTimeMs: r.response_time_ms ?? null,
      });
  };
  const recent = await ctx.stores.series.page(availabilitySamples, {
    where: [{ column: "connection_id", op: "in", value: visible }],
    since: new Date(Math.max(since.getTime(), until.getTime() - RECENT_MS)),
    limit: RECENT_LIMIT,
  });
  for (const r of recent.rows) take(r);
  const rest = visible.filter((id) => !out.has(id));
  const pages = await Promise.all(
    rest.map((id) =>
      ctx.stores.series.page(availabilitySamples, {
        where: [{ column: "connection_id", op: "eq", value: id }],
        since,
        limit: 1,
      }),
    ),
  );
  for (const p of pages) for (const r of p.rows) take(r);
  return out;
}

export const TIMELINE_RANGES = ["24h", "7d", "30d", "90d"] as const;
export type TimelineRange = (typeof TIMELINE_RANGES)[number];

/** How each range is read and bucketed. */
const RANGE: Record<TimelineRange, { ms: number; bucketMs: number; source: "raw" | "hourly" | "daily" }> = {
  // raw samples in 5-minute buckets: 288 points (a check every 10 s is 8,640 samples a day)
  "24h": { ms: DAY_MS, bucketMs: 5 * 60_000, source: "raw" },
  // raw samples summed by the store per UTC hour: 168 points
  "7d": { ms: 7 * DAY_MS, bucketMs: HOUR_MS, source: "hourly" },
  // the daily rollup (and today's raw samples): 30 and 90 points
  "30d": { ms: 30 * DAY_MS, bucketMs: DAY_MS, source: "daily" },
  "90d": { ms: 90 * DAY_MS, bucketMs: DAY_MS, source: "daily" },
};

/** The most raw samples the 24-hour view reads (a check a second would be 86,400). */
const RAW_LIMIT = 20_000;

export interface AvailabilityTimeline {
  connectionId: string;
  range: TimelineRange;
  since: Date;
  until: Date;
  bucketMs: number;
  /** Every bucket of the range, oldest first; buckets without checks at zero. */
  cells: UptimeCell[];
  checks: number;
  available: number;
  /** Checks under maintenance over the range (not in checks, available or uptime). */
  maintenance: number;
  uptimePercent: number | null;
  avgResponseMs: number | null;
  /** The 24-hour view read its newest RAW_LIMIT samples only (more checks than that in a day). */
  truncated: boolean;
}

/**
 * One connection's availability and response time over the last 24 hours, 7 days, 30 days or 90
 * days, in buckets fit for a chart: 24 h from raw samples in 5-minute buckets; 7 d summed per UTC
 * hour by the store; 30 d and 90 d per UTC day through the rollups (availabilityByDay: rolled days
 * from `availability_daily`, today and late days from raw samples). 404 when the connection does
 * not exist, 403 when the actor may not see it.
 */
export async function availabilityTimeline(
  ctx: AppContext,
  actor: Actor,
  connectionId: string,
  range: TimelineRange,
): Promise<AvailabilityTimeline> {
  await requireReadable(ctx, actor, connectionId);
  const spec = RANGE[range];
  const until = ctx.now();
  const scope: Filter = { column: "connection_id", op: "eq", value: connectionId };
  const first =
    spec.source === "daily"
      ? dayStart(until).getTime() - (spec.ms / DAY_MS - 1) * DAY_MS
      : Math.floor((until.getTime() - spec.ms) / spec.bucketMs + 1) * spec.bucketMs;
  const n = Math.ceil((until.getTime() - first) / spec.bucketMs);
  const cells: UptimeCell[] = Array.from({ length: n }, (_, i) => ({
    start: new Date(first + i * spec.bucketMs),
    checks: 0,
    available: 0,
    maintenance: 0,
    avgResponseMs: null,
  }));
  const sums = cells.map(() => [0, 0] as [number, number]);
  const add = (
    at: number,
    checks: number,
    up: number,
    rsSum: number,
    rsCount: number,
    maintenance: number,
  ) => {
    const i = Math.floor((at - first) / spec.bucketMs);
    const c = cells[i];
    const s = sums[i];
    if (!c || !s) return;
    c.checks += checks;
    c.available += up;
    c.maintenance += maintenance;
    s[0] += rsSum;
    s[1] += rsCount;
  };
  let truncated = false;
  const since = new Date(first);
  if (spec.source === "raw") {
    const page = await ctx.stores.series.page(availabilitySamples, {
      where: [scope],
      since,
      until,
      limit: RAW_LIMIT,
    });
    truncated = page.next !== null;
    for (const r of page.rows)
      if (r.maintenance === true) add(r.ts.getTime(), 0, 0, 0, 0, 1);
      else
        add(
          r.ts.getTime(),
          1,
          r.available ? 1 : 0,
          r.response_time_ms ?? 0,
          r.response_time_ms === undefined || r.response_time_ms === null ? 0 : 1,
          0,
        );
  } else if (spec.source === "hourly") {
    const rows = await ctx.stores.series.aggregate(availabilitySamples, {
      bucket: "hour",
      where: [scope],
      since,
      until,
      groupBy: ["connection_id"],
      measures: SAMPLE_MEASURES,
    });
    for (const r of rows) {
      const t = toRollup(r);
      add(t.ts.getTime(), t.checks, t.available, t.response_ms_sum, t.response_ms_count, t.maintenance);
    }
  } else {
    for (const t of await availabilityByDay(ctx, scope, since, until, "day"))
      add(t.bucket.getTime(), t.checks, t.available, t.response_ms_sum, t.response_ms_count, t.maintenance);
  }
  let checks = 0;
  let up = 0;
  let maintenance = 0;
  let rsSum = 0;
  let rsCount = 0;
  cells.forEach((c, i) => {
    const s = sums[i] ?? [0, 0];
    c.avgResponseMs = s[1] ? Math.round((s[0] / s[1]) * 10) / 10 : null;
    checks += c.checks;
    up += c.available;
    maintenance += c.maintenance;
    rsSum += s[0];
    rsCount += s[1];
  });
  return {
    connectionId,
    range,
    since,
    until,
    bucketMs: spec.bucketMs,
    cells,
    checks,
    available: up,
    maintenance,
    uptimePercent: uptimePercent(up, checks),
    avgResponseMs: rsCount ? Math.round((rsSum / rsCount) * 10) / 10 : null,
    truncated,
  };
}
