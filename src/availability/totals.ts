import type { AppContext } from "../core/context.js";
import {
  dayStart,
  monthStart,
  ROLLUP_SUMS,
  rollupState,
  SAMPLE_MEASURES,
  toRollup,
} from "../retention/rollups.js";
import {
  availabilityDaily,
  availabilityMonthly,
  availabilityPartial,
  availabilitySamples,
} from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";

/**
 * Availability totals read from the rollups where they can be trusted and from raw samples
 * elsewhere (docs/operations.md: Retention and rollups). The rollups themselves are written by the
 * retention job (retention/rollups.ts); the summary and the analytics read through here.
 */

const DAY_MS = 86_400_000;

/** Availability totals of one connection over some span. */
export interface AvailabilityTotals {
  connection_id: string;
  /** Start of the UTC day (or month, for rows from the monthly rollup); `since` for totals. */
  bucket: Date;
  checks: number;
  available: number;
  response_ms_sum: number;
  response_ms_count: number;
  /** Samples taken under maintenance (docs/maintenance.md): not in checks, available or response times. */
  maintenance: number;
}

/**
 * Availability per connection over [since, until), per UTC day (`bucket: "day"`) or as one total
 * per connection (`"all"`; rows of several spans, to be summed by the caller). Days the rollup
 * can be trusted for come from the daily rollup, which outlives raw samples; the day the last
 * rollup run reached (normally today) from that run's partial rows up to its watermark plus the
 * raw samples after it; the rest (a day with a late sample, a day the rollup has not reached)
 * from raw samples, so the numbers are exact to the moment. `since` is taken from the start of its
 * day.
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
  const isDirty = (d: Date) => state.dirty.some((x) => x.getTime() === d.getTime());
  // spans read from raw samples: dirty days inside the rolled range, and everything after it
  const rawSpans: [Date, Date][] = [];
  const dirty = state.dirty.filter((d) => d >= from && d < rollupUntil);
  for (const d of dirty) rawSpans.push([d, new Date(d.getTime() + DAY_MS)]);
  const reads: Promise<AvailabilityTotals[]>[] = [];
  if (until > rollupUntil) {
    let rawFrom = new Date(Math.max(rollupUntil.getTime(), from.getTime()));
    // the partial day: the last run's rows up to its watermark, then raw samples after it
    const mark = state.partialThrough;
    if (mark && dayStart(mark).getTime() === rawFrom.getTime() && until >= mark && !isDirty(rawFrom)) {
      const day = rawFrom;
      reads.push(
        availabilityTotals(ctx, availabilityPartial, scope, mark, new Date(mark.getTime() + 1), "all").then(
          (rows) => rows.map((r) => ({ ...r, bucket: day })),
        ),
      );
      rawFrom = mark;
    }
    rawSpans.push([rawFrom, until]);
  }
  // rolled spans: [from, rollupUntil) without the dirty days
  const rolledSpans: [Date, Date][] = [];
  let cursor = from;
  for (const d of [...dirty, rollupUntil]) {
    if (d > cursor) rolledSpans.push([cursor, d]);
    cursor = new Date(d.getTime() + DAY_MS);
  }
  const parts = (
    await Promise.all([
      ...rolledSpans.map(([a, b]) => availabilityTotals(ctx, availabilityDaily, scope, a, b, bucket)),
      ...rawSpans.map(([a, b]) => availabilityTotals(ctx, availabilitySamples, scope, a, b, bucket)),
      ...reads,
    ])
  ).flat();
  if (reads.length === 0 || bucket === "all") return parts;
  // the partial day's rows and its raw rows after the watermark: one row per connection and day
  return sumTotals(parts, (p) => p.bucket);
}

/** Sums totals into one row per connection and bucket (`bucketOf` maps each row's date to its bucket's start). */
export function sumTotals(
  parts: readonly AvailabilityTotals[],
  bucketOf: (p: AvailabilityTotals) => Date,
): AvailabilityTotals[] {
  const byKey = new Map<string, AvailabilityTotals>();
  for (const p of parts) {
    const bucket = bucketOf(p);
    const k = `${bucket.getTime()}\u0000${p.connection_id}`;
    const e = byKey.get(k);
    if (!e) byKey.set(k, { ...p, bucket });
    else {
      e.checks += p.checks;
      e.available += p.available;
      e.response_ms_sum += p.response_ms_sum;
      e.response_ms_count += p.response_ms_count;
      e.maintenance += p.maintenance;
    }
  }
  return [...byKey.values()];
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
  table: typeof availabilitySamples | typeof availabilityDaily | typeof availabilityPartial,
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
