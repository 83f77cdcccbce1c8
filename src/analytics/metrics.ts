import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import type { Page, Position, Window } from "../core/page.js";
import { executions, gatewayHeartbeats, usageEntries } from "../stores/series/tables.js";
import type { AggregateRow, Bucket, Filter } from "../stores/series/types.js";
import { connectionWalk, idScope } from "../connections/scope.js";
import { DAILY_ROLLUP_DAYS } from "../retention/policy.js";
import { dayStart, monthStart } from "../retention/rollups.js";
import {
  availabilityByDay,
  availabilityByMonth,
  type AvailabilityTotals,
  sumTotals,
} from "../availability/totals.js";

type Measure = "executions" | "success_rate" | "avg_duration" | "availability";
/** The spec's metric types: a calendar unit and a measure, plus the monthly gateway cost. */
export type MetricType = `${"daily" | "weekly" | "monthly"}_${Measure}` | "monthly_gateway_cost";

export interface MetricsQuery extends Window {
  metricType: MetricType;
  connectionId?: string;
  limit: number;
  /** Continue after this row: its bucket start and connection id. */
  after?: Position;
}

/** One connection's value of a metric over one calendar bucket. */
export interface MetricRow {
  connection_id: string;
  metric_type: MetricType;
  bucket_start: string;
  value: number | null;
  sample_count: number;
}

const DAY = 86_400_000;
const DEFAULT_RANGE: Record<Exclude<Bucket, "minute" | "five_minutes" | "hour" | "all">, number> = {
  day: 30 * DAY,
  week: 84 * DAY,
  month: 366 * DAY,
};
const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

/** Ids per series statement: at least this many, so sparse buckets do not cost a statement per row. */
const CHUNK_MIN = 250;
/** And at most this many. */
const CHUNK_MAX = 2000;

/**
 * Metric values: one row per connection and calendar bucket (UTC; weeks start on Monday),
 * computed from the series with SAMPLE BY on QuestDB and date_trunc on the SQL backend.
 * Units: executions a count; success_rate a fraction 0–1 of runs that succeeded;
 * avg_duration milliseconds; availability percent of checks available (synthetic samples
 * included); monthly_gateway_cost US cents of heartbeat and usage-entry cost together.
 * Rows come newest bucket first, then by connection id descending; `after` continues after a
 * row (its bucket start and connection id) and `next` is the position of the last row returned.
 *
 * Only the page is computed (issue #17, big accounts): the walk goes bucket by bucket, newest
 * first, and within a bucket over the caller's visible connections by id descending, one page
 * of ids from PostgreSQL at a time (connections/scope.ts, `connectionWalk`), each page's values
 * computed by the series store over that bucket alone; it stops once `limit + 1` rows are
 * found. When every visible connection fits in one page of ids (a small account, or one
 * connection), as many buckets as the page can fill are computed in one go instead. The cost
 * left: for a large account, a bucket in which none of its connections has a value still takes a
 * pass over all of its ids (one cheap statement per chunk of ids) before the walk moves on.
 */
export async function metrics(
  ctx: AppContext,
  actor: Actor,
  q: MetricsQuery,
  /** Ids per series statement (tests make them small to walk many chunks). */
  chunk: { min: number; max: number } = { min: CHUNK_MIN, max: CHUNK_MAX },
): Promise<Page<MetricRow>> {
  const [unit, ...rest] = q.metricType.split("_");
  const bucket = ({ daily: "day", weekly: "week", monthly: "month" } as const)[
    unit as "daily" | "weekly" | "monthly"
  ];
  const measure = rest.join("_");
  const until = q.until ?? ctx.now();
  const since = q.since ?? new Date(until.getTime() - DEFAULT_RANGE[bucket]);
  const walk = await connectionWalk(ctx, actor, "desc", q.connectionId);
  // whole buckets: a bucket's value always covers its whole day, week or month
  const first = bucketStart(since, bucket);
  const compute = (ids: readonly string[], from: Date, to: Date) =>
    bucketRows(ctx, q.metricType, measure, idScope(ids), { since: from, until: to, bucket });

  // the position: bucket `b`, and in it the connections before `before` (all when undefined)
  let b = bucketStart(new Date(until.getTime() - 1), bucket);
  let before: string | undefined;
  if (q.after) {
    const t = bucketStart(q.after.ts, bucket);
    if (t.getTime() === q.after.ts.getTime()) {
      // rows of bucket t before the cursor's connection, then every older bucket
      if (t <= b) {
        b = t;
        before = q.after.key[0] ?? "";
      }
    } else if (t < b) b = t; // a cursor inside a bucket: that bucket starts before it, whole
  }
  const want = q.limit + 1;
  const out: MetricRow[] = [];
  while (out.length < want && b >= first) {
    const need = want - out.length;
    const ask = Math.min(chunk.max, Math.max(need, chunk.min));
    const ids = await walk.page(before, ask);
    if (before === undefined && ids.length < ask) {
      // every visible connection is in `ids`: fill the page from as many buckets as it needs
      if (ids.length === 0) break;
      const k = Math.ceil(need / ids.length);
      const from = maxDate(first, shift(b, bucket, 1 - k));
      out.push(...sortRows(await compute(ids, from, minDate(shift(b, bucket, 1), until))));
      b = shift(from, bucket, -1);
      continue;
    }
    if (ids.length > 0) out.push(...sortRows(await compute(ids, b, minDate(shift(b, bucket, 1), until))));
    if (ids.length < ask) {
      b = shift(b, bucket, -1);
      before = undefined;
    } else before = ids[ids.length - 1];
  }
  const page = out.slice(0, q.limit);
  const last = page[page.length - 1];
  return {
    rows: page,
    next:
      out.length > q.limit && last ? { ts: new Date(last.bucket_start), key: [last.connection_id] } : null,
  };
}

/** The bucket `n` buckets after `b` (before, for negative `n`). */
function shift(b: Date, bucket: "day" | "week" | "month", n: number): Date {
  if (bucket === "month") return new Date(Date.UTC(b.getUTCFullYear(), b.getUTCMonth() + n, 1));
  return new Date(b.getTime() + n * (bucket === "week" ? 7 : 1) * DAY);
}
const minDate = (a: Date, b: Date) => (a < b ? a : b);
const maxDate = (a: Date, b: Date) => (a > b ? a : b);

/** Newest bucket first, then connection id descending (plain comparisons: ISO strings of one format order as strings). */
function sortRows(rows: MetricRow[]): MetricRow[] {
  return rows.sort((a, b) =>
    a.bucket_start !== b.bucket_start
      ? a.bucket_start < b.bucket_start
        ? 1
        : -1
      : a.connection_id < b.connection_id
        ? 1
        : a.connection_id > b.connection_id
          ? -1
          : 0,
  );
}

/** The metric's rows for the connections in `scope` over whole buckets [since, until). */
async function bucketRows(
  ctx: AppContext,
  metricType: MetricType,
  measure: string,
  scope: Filter,
  range: { since: Date; until: Date; bucket: "day" | "week" | "month" },
): Promise<MetricRow[]> {
  const row = (r: AggregateRow, value: number | null, count: number): MetricRow => ({
    connection_id: String(r.connection_id),
    metric_type: metricType,
    bucket_start: (r.bucket as Date).toISOString(),
    value,
    sample_count: count,
  });
  if (measure === "availability")
    return (await availabilityBuckets(ctx, scope, range)).map((b) =>
      row(
        { bucket: b.bucket, connection_id: b.connection_id },
        b.checks ? round((b.available / b.checks) * 100, 3) : null,
        b.checks,
      ),
    );
  if (measure === "gateway_cost") return gatewayCost(ctx, scope, range);
  const agg = await ctx.stores.series.aggregate(executions, {
    ...range,
    where: [scope],
    groupBy: ["connection_id", "status"],
    measures: { n: { fn: "count" }, avg_ms: { fn: "avg", column: "duration_ms" } },
  });
  const byKey = new Map<string, { r: AggregateRow; runs: number; ok: number; dur: number; durN: number }>();
  for (const r of agg) {
    const k = `${(r.bucket as Date).getTime()}\u0000${r.connection_id}`;
    const e = byKey.get(k) ?? { r, runs: 0, ok: 0, dur: 0, durN: 0 };
    const n = Number(r.n);
    e.runs += n;
    if (r.status === "success") e.ok += n;
    if (r.avg_ms !== null) {
      e.dur += Number(r.avg_ms) * n;
      e.durN += n;
    }
    byKey.set(k, e);
  }
  return [...byKey.values()].map((e) => {
    if (measure === "executions") return row(e.r, e.runs, e.runs);
    if (measure === "success_rate") return row(e.r, e.runs ? round(e.ok / e.runs, 4) : null, e.runs);
    return row(e.r, e.durN ? round(e.dur / e.durN, 1) : null, e.durN);
  });
}

async function gatewayCost(
  ctx: AppContext,
  scope: Filter,
  range: { since: Date; until: Date; bucket: Bucket },
): Promise<MetricRow[]> {
  const [hb, entries] = await Promise.all([
    ctx.stores.series.aggregate(gatewayHeartbeats, {
      ...range,
      where: [scope],
      groupBy: ["connection_id"],
      measures: { n: { fn: "count" }, usd: { fn: "sum", column: "cost_usd" } },
    }),
    ctx.stores.series.aggregate(usageEntries, {
      ...range,
      where: [scope],
      groupBy: ["connection_id"],
      measures: { n: { fn: "count" }, cents: { fn: "sum", column: "cost_cents" } },
    }),
  ]);
  const byKey = new Map<string, MetricRow>();
  const add = (r: AggregateRow, cents: number, n: number) => {
    const bucket = (r.bucket as Date).toISOString();
    const k = `${bucket}\u0000${r.connection_id}`;
    const e = byKey.get(k) ?? {
      connection_id: String(r.connection_id),
      metric_type: "monthly_gateway_cost" as const,
      bucket_start: bucket,
      value: 0,
      sample_count: 0,
    };
    e.value = round((e.value ?? 0) + cents, 4);
    e.sample_count += n;
    byKey.set(k, e);
  };
  for (const r of hb) add(r, Number(r.usd ?? 0) * 100, Number(r.n));
  for (const r of entries) add(r, Number(r.cents ?? 0), Number(r.n));
  return [...byKey.values()];
}

/** Start of the UTC bucket holding `d` (weeks start on Monday). */
export function bucketStart(d: Date, bucket: "day" | "week" | "month"): Date {
  const day = dayStart(d);
  if (bucket === "day") return day;
  if (bucket === "month") return monthStart(d);
  return new Date(day.getTime() - ((day.getUTCDay() + 6) % 7) * DAY);
}

/**
 * Availability per connection and bucket from the rollups (docs/operations.md: Retention and rollups): days from the daily
 * rollup and raw samples, summed into weeks and months; months older than the daily rollup keeps
 * from the monthly rollup.
 */
async function availabilityBuckets(
  ctx: AppContext,
  scope: Filter,
  range: { since: Date; until: Date; bucket: "day" | "week" | "month" },
): Promise<AvailabilityTotals[]> {
  let since = range.since;
  const parts: AvailabilityTotals[] = [];
  if (range.bucket === "month") {
    // the first month the daily rollup still covers whole
    const dailyFrom = monthStart(new Date(ctx.now().getTime() - (DAILY_ROLLUP_DAYS - 31) * DAY));
    if (since < dailyFrom) {
      const upto = minDate(dailyFrom, range.until);
      parts.push(...(await availabilityByMonth(ctx, scope, since, upto)));
      since = upto;
    }
  }
  if (since < range.until) parts.push(...(await availabilityByDay(ctx, scope, since, range.until)));
  // days come one row per connection and day already (rolled and raw spans do not overlap)
  if (range.bucket === "day") return parts.filter((e) => e.checks > 0);
  const bucket = range.bucket;
  return sumTotals(parts, (p) => bucketStart(p.bucket, bucket)).filter((e) => e.checks > 0);
}
