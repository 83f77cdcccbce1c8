import type { AppContext } from "../core/context.js";
import {
  availabilityDaily,
  availabilityMonthly,
  availabilityPartial,
  availabilitySamples,
  type RowOf,
} from "../stores/series/tables.js";
import type { AggregateRow, Measure } from "../stores/series/types.js";
import { MAX_RAW_RETENTION_DAYS, ROLLUP_LATENESS_MS } from "./policy.js";
import { recordRollupRun, selectRollupState } from "./repository.js";

const DAY_MS = 86_400_000;
export const dayStart = (d: Date) => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
export const monthStart = (d: Date) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));

/**
 * The rollup's numbers, aggregated from raw samples. Samples taken under maintenance
 * (docs/maintenance.md) are left out of uptime and response times and counted apart.
 */
export const SAMPLE_MEASURES = {
  checks: { fn: "count", unless: "maintenance" },
  available: { fn: "countTrue", column: "available", unless: "maintenance" },
  response_ms_sum: { fn: "sum", column: "response_time_ms", unless: "maintenance" },
  response_ms_count: { fn: "count", column: "response_time_ms", unless: "maintenance" },
  maintenance: { fn: "countTrue", column: "maintenance" },
} as const satisfies Record<string, Measure>;

export const toRollup = (r: AggregateRow): RowOf<typeof availabilityDaily> & { maintenance: number } => ({
  ts: r.bucket as Date,
  connection_id: String(r.connection_id),
  checks: Number(r.checks ?? 0),
  available: Number(r.available ?? 0),
  response_ms_sum: Number(r.response_ms_sum ?? 0),
  response_ms_count: Number(r.response_ms_count ?? 0),
  maintenance: Number(r.maintenance ?? 0),
});

/**
 * What the daily rollup can be trusted for: every day before the one holding `rolledThrough` was
 * rolled up after it ended, except the `dirty` days, which received a late sample (gap-fill or a
 * late heartbeat) since (marked by the samples writer, availability/samples.ts). `partialThrough`
 * is the newest watermark whose partial rows are all written: the day holding it is counted by
 * those rows up to it. Null: nothing rolled up yet.
 */
export function rollupState(
  ctx: AppContext,
): Promise<{ rolledThrough: Date | null; partialThrough: Date | null; dirty: Date[] }> {
  return selectRollupState(ctx.stores.db);
}

/**
 * Rolls raw availability samples up into daily rows, and daily rows into monthly ones, up to the
 * run's watermark, {@link ROLLUP_LATENESS_MS} before it started: whole days before the
 * watermark's day into the daily rollup, and the watermark's own day, from its start to the
 * watermark, into partial rows dated the watermark (`availability_partial`), which reads of that
 * day complete with the raw samples after it (availability/totals.ts). Days are redone from the day
 * the last run reached (at least yesterday, which may still receive gap-fill) and every day
 * marked dirty; on a first run, from the oldest sample any plan keeps. Waits until every
 * acknowledged write is visible first, so nothing acknowledged before the run is missed; then
 * records how far it got and clears the dirty marks it covered. A sample acknowledged after the
 * run started and older than its watermark was committed more than ROLLUP_LATENESS_MS late, so
 * it marked its day. Idempotent: rows are upserts, so a run repeated or run by two nodes at once
 * writes the same numbers, and each run's partial rows have a key of their own.
 */
export async function rollUp(
  ctx: AppContext,
  opts: { since?: Date } = {},
): Promise<{ days: number; months: number; partial: number }> {
  const series = ctx.stores.series;
  const started = ctx.now();
  const watermark = new Date(started.getTime() - ROLLUP_LATENESS_MS);
  const partialDay = dayStart(watermark);
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
  const days =
    since < partialDay
      ? await rollInto(ctx, availabilitySamples, availabilityDaily, "day", since, partialDay)
      : 0;
  const partialRows = (
    await series.aggregate(availabilitySamples, {
      bucket: "all",
      since: partialDay,
      until: watermark,
      groupBy: ["connection_id"],
      measures: SAMPLE_MEASURES,
    })
  ).map((r) => toRollup({ ...r, bucket: watermark }));
  if (partialRows.length) await series.append(availabilityPartial, partialRows);
  await series.waitVisible();
  // months from the daily rows, which outlive the raw samples a month's first days may have lost
  const months = await rollInto(
    ctx,
    availabilityDaily,
    availabilityMonthly,
    "month",
    monthStart(since),
    partialDay,
  );
  await recordRollupRun(ctx.stores.db, started, watermark);
  return { days, months, partial: partialRows.length };
}

/**
 * Aggregates `from` per connection and `bucket` over [since, until) and upserts the rows into
 * `to`; resolves with the row count once they are visible to reads.
 */
async function rollInto(
  ctx: AppContext,
  from: typeof availabilitySamples | typeof availabilityDaily,
  to: typeof availabilityDaily | typeof availabilityMonthly,
  bucket: "day" | "month",
  since: Date,
  until: Date,
): Promise<number> {
  const series = ctx.stores.series;
  const measures = from === availabilitySamples ? SAMPLE_MEASURES : ROLLUP_SUMS;
  const rows = (
    await series.aggregate(from, { bucket, since, until, groupBy: ["connection_id"], measures })
  ).map(toRollup);
  if (rows.length) await series.append(to, rows);
  await series.waitVisible();
  return rows.length;
}

/** The rollup's numbers, summed from rollup rows (days into months, or a span of days). */
export const ROLLUP_SUMS = {
  checks: { fn: "sum", column: "checks" },
  available: { fn: "sum", column: "available" },
  response_ms_sum: { fn: "sum", column: "response_ms_sum" },
  response_ms_count: { fn: "sum", column: "response_ms_count" },
  maintenance: { fn: "sum", column: "maintenance" },
} as const satisfies Record<string, Measure>;
