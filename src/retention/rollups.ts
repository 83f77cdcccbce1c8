import type { AppContext } from "../context.js";
import {
  availabilityDaily,
  availabilityMonthly,
  availabilitySamples,
  type RowOf,
} from "../stores/series/tables.js";
import type { AggregateRow, Filter, Measure } from "../stores/series/types.js";
import { MAX_RAW_RETENTION_DAYS } from "./policy.js";

const DAY_MS = 86_400_000;
export const dayStart = (d: Date) => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
export const monthStart = (d: Date) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));

/** The rollup's numbers, aggregated from raw samples. */
export const SAMPLE_MEASURES = {
  checks: { fn: "count" },
  available: { fn: "countTrue", column: "available" },
  response_ms_sum: { fn: "sum", column: "response_time_ms" },
  response_ms_count: { fn: "count", column: "response_time_ms" },
} as const satisfies Record<string, Measure>;

export const toRollup = (r: AggregateRow): RowOf<typeof availabilityDaily> => ({
  ts: r.bucket as Date,
  connection_id: String(r.connection_id),
  checks: Number(r.checks ?? 0),
  available: Number(r.available ?? 0),
  response_ms_sum: Number(r.response_ms_sum ?? 0),
  response_ms_count: Number(r.response_ms_count ?? 0),
});

/**
 * What the daily rollup can be trusted for: every day before the one holding `rolledThrough` was
 * rolled up after it ended, except the `dirty` days, which received a late sample (gap-fill or a
 * late heartbeat) since. Null `rolledThrough`: nothing rolled up yet.
 */
export async function rollupState(ctx: AppContext): Promise<{ rolledThrough: Date | null; dirty: Date[] }> {
  const r = await ctx.stores.db.query<{ rolled_through: Date | null; dirty: Date[] | null }>(
    `SELECT (SELECT rolled_through FROM rollup_state WHERE id = 1) AS rolled_through,
            (SELECT array_agg(day ORDER BY day) FROM rollup_dirty) AS dirty`,
  );
  const row = r.rows[0];
  return {
    rolledThrough: row?.rolled_through ? new Date(row.rolled_through) : null,
    dirty: (row?.dirty ?? []).map((d) => new Date(d)),
  };
}

const MARK_EVERY_MS = 1000;
const markedAt = new WeakMap<AppContext, Map<number, number>>();

/**
 * Marks the past days that samples just written fall on, so reads take those days from raw
 * samples until the next rollup run has redone them. Called after the write is acknowledged;
 * samples of today need no mark.
 */
export async function markLateSamples(ctx: AppContext, rows: readonly { ts: Date }[]): Promise<void> {
  const now = ctx.now();
  const today = dayStart(now).getTime();
  const recent = markedAt.get(ctx) ?? new Map<number, number>();
  markedAt.set(ctx, recent);
  const days = new Set<number>();
  for (const r of rows) {
    if (r.ts.getTime() >= today) continue;
    const day = dayStart(r.ts).getTime();
    // a flood of late samples (a fleet reconnecting after midnight) refreshes a day's mark at
    // most once a second; the rollup run redoes yesterday every time anyway
    if (now.getTime() - (recent.get(day) ?? -Infinity) >= MARK_EVERY_MS) days.add(day);
  }
  if (days.size === 0) return;
  for (const d of days) recent.set(d, now.getTime());
  for (const d of recent.keys()) if (d < today - DAY_MS) recent.delete(d);
  await ctx.stores.db.query(
    `INSERT INTO rollup_dirty (day, marked_at)
     SELECT d, $2 FROM unnest($1::timestamptz[]) d
     ON CONFLICT (day) DO UPDATE SET marked_at = greatest(rollup_dirty.marked_at, excluded.marked_at)`,
    [[...days].map((d) => new Date(d).toISOString()), now.toISOString()],
  );
}

/**
 * Rolls raw availability samples up into daily rows, and daily rows into monthly ones: from the
 * day the last run reached (at most from yesterday on, which may still receive gap-fill), and
 * every day marked dirty; on a first run, from the oldest sample any plan keeps. Waits until
 * every acknowledged write is visible first, so nothing acknowledged before the run is missed;
 * then records how far it got and clears the dirty marks it covered. Idempotent: rows are
 * upserts, so a run repeated or run by two nodes at once writes the same numbers.
 */
export async function rollUp(
  ctx: AppContext,
  opts: { since?: Date } = {},
): Promise<{ days: number; months: number }> {
  const series = ctx.stores.series;
  const started = ctx.now();
  const state = await rollupState(ctx);
  let since = opts.since;
  if (!since) {
    const candidates = [new Date(dayStart(started).getTime() - DAY_MS), ...state.dirty];
    // the day before the last run's day too: a late sample whose mark a run cleared just before
    // midnight is still redone by the first run after it
    if (state.rolledThrough) candidates.push(new Date(state.rolledThrough.getTime() - DAY_MS));
    else candidates.push(new Date(started.getTime() - MAX_RAW_RETENTION_DAYS * DAY_MS));
    since = new Date(Math.min(...candidates.map((d) => d.getTime())));
  }
  since = dayStart(since);
  await series.waitVisible();
  const days = (
    await series.aggregate(availabilitySamples, {
      bucket: "day",
      since,
      until: started,
      groupBy: ["connection_id"],
      measures: SAMPLE_MEASURES,
    })
  ).map(toRollup);
  if (days.length) await series.append(availabilityDaily, days);
  await series.waitVisible();
  // months from the daily rows, which outlive the raw samples a month's first days may have lost
  const months = (
    await series.aggregate(availabilityDaily, {
      bucket: "month",
      since: monthStart(since),
      until: started,
      groupBy: ["connection_id"],
      measures: ROLLUP_SUMS,
    })
  ).map(toRollup);
  if (months.length) await series.append(availabilityMonthly, months);
  await series.waitVisible();
  await ctx.stores.db.query(
    `INSERT INTO rollup_state (id, rolled_through) VALUES (1, $1)
     ON CONFLICT (id) DO UPDATE SET rolled_through = greatest(rollup_state.rolled_through, excluded.rolled_through)`,
    [started.toISOString()],
  );
  await ctx.stores.db.query("DELETE FROM rollup_dirty WHERE marked_at <= $1", [started.toISOString()]);
  return { days: days.length, months: months.length };
}

/** Availability totals of one connection over some span. */
export interface AvailabilityTotals {
  connection_id: string;
  /** Start of the UTC day (or month, for rows from the monthly rollup); `since` for totals. */
  bucket: Date;
  checks: number;
  available: number;
  response_ms_sum: number;
  response_ms_count: number;
}

const ROLLUP_SUMS = {
  checks: { fn: "sum", column: "checks" },
  available: { fn: "sum", column: "available" },
  response_ms_sum: { fn: "sum", column: "response_ms_sum" },
  response_ms_count: { fn: "sum", column: "response_ms_count" },
} as const satisfies Record<string, Measure>;

/**
 * Availability per connection over [since, until), per UTC day (`bucket: "day"`) or as one total
 * per connection (`"all"`; rows of several spans, to be summed by the caller). Days the rollup
 * can be trusted for come from the daily rollup, which outlives raw samples; the rest (today,
 * a day not yet rolled up after it ended, a day with a late sample) from raw samples, so the
 * numbers are exact to the moment. `since` is taken from the start of its day.
 */
export async function availabilityByDay(
  ctx: AppContext,
  scope: Filter,
  since: Date,
  until: Date,
  bucket: "day" | "all" = "day",
): Promise<AvailabilityTotals[]> {
  const from = dayStart(since);
  const state = await rollupState(ctx);
  const trusted = state.rolledThrough ? dayStart(state.rolledThrough) : from;
  const rollupUntil = new Date(Math.min(trusted.getTime(), until.getTime()));
  // spans read from raw samples: dirty days inside the rolled range, and everything after it
  const rawSpans: [Date, Date][] = [];
  const dirty = state.dirty.filter((d) => d >= from && d < rollupUntil);
  for (const d of dirty) rawSpans.push([d, new Date(d.getTime() + DAY_MS)]);
  if (until > rollupUntil) rawSpans.push([new Date(Math.max(rollupUntil.getTime(), from.getTime())), until]);
  // rolled spans: [from, rollupUntil) without the dirty days
  const rolledSpans: [Date, Date][] = [];
  let cursor = from;
  for (const d of [...dirty, rollupUntil]) {
    if (d > cursor) rolledSpans.push([cursor, d]);
    cursor = new Date(d.getTime() + DAY_MS);
  }
  const parts = await Promise.all([
    ...rolledSpans.map(([a, b]) => availabilityTotals(ctx, availabilityDaily, scope, a, b, bucket)),
    ...rawSpans.map(([a, b]) => availabilityTotals(ctx, availabilitySamples, scope, a, b, bucket)),
  ]);
  return parts.flat();
}

/** Monthly rollup rows over [since, until) (months older than the daily rollup keeps). */
export function availabilityByMonth(ctx: AppContext, scope: Filter, since: Date, until: Date) {
  return availabilityTotals(ctx, availabilityMonthly, scope, monthStart(since), until, "month");
}

/**
 * Availability totals per connection and bucket over [since, until) from raw samples or from a
 * rollup table (summing its rows); a total over the whole span (`all`) is dated `since`.
 */
export async function availabilityTotals(
  ctx: AppContext,
  table: typeof availabilitySamples | typeof availabilityDaily,
  scope: Filter,
  since: Date,
  until: Date,
  bucket: "day" | "month" | "all",
): Promise<AvailabilityTotals[]> {
  const rows = await ctx.stores.series.aggregate(table, {
    bucket,
    where: [scope],
    since,
    until,
    groupBy: ["connection_id"],
    measures: table === availabilitySamples ? SAMPLE_MEASURES : ROLLUP_SUMS,
  });
  return rows.map((r) => {
    const { ts, ...rest } = toRollup({ ...r, bucket: r.bucket ?? since });
    return { ...rest, bucket: ts };
  });
}
