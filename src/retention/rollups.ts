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

/**
 * The first day whose availability is always read from raw samples: yesterday (UTC). No writer
 * stores a sample older than a day (probe and heartbeat gap-fill reach back at most a day, and a
 * late heartbeat older than that adds no sample), so days before it are final once rolled up.
 */
export const rawFrom = (now: Date) => new Date(dayStart(now).getTime() - DAY_MS);

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
 * Rolls raw availability samples up into daily rows, and daily rows into monthly ones, for every
 * day since the newest day already rolled up (at most from yesterday on; on an empty table, from
 * the oldest sample any plan keeps). Idempotent: rows are upserts, so a run repeated or run by two
 * nodes at once writes the same numbers.
 */
export async function rollUp(
  ctx: AppContext,
  opts: { since?: Date } = {},
): Promise<{ days: number; months: number }> {
  const series = ctx.stores.series;
  const now = ctx.now();
  let since = opts.since;
  if (!since) {
    const newest = (await series.page(availabilityDaily, { limit: 1 })).rows[0];
    since = newest
      ? new Date(Math.min(newest.ts.getTime(), rawFrom(now).getTime()))
      : new Date(now.getTime() - MAX_RAW_RETENTION_DAYS * DAY_MS);
  }
  since = dayStart(since);
  const days = (
    await series.aggregate(availabilitySamples, {
      bucket: "day",
      since,
      until: now,
      groupBy: ["connection_id"],
      measures: SAMPLE_MEASURES,
    })
  ).map(toRollup);
  if (days.length) await series.append(availabilityDaily, days);
  await series.waitVisible();

  const months = (
    await series.aggregate(availabilityDaily, {
      bucket: "month",
      since: monthStart(since),
      until: now,
      groupBy: ["connection_id"],
      measures: {
        checks: { fn: "sum", column: "checks" },
        available: { fn: "sum", column: "available" },
        response_ms_sum: { fn: "sum", column: "response_ms_sum" },
        response_ms_count: { fn: "sum", column: "response_ms_count" },
      },
    })
  ).map(toRollup);
  if (months.length) await series.append(availabilityMonthly, months);
  return { days: days.length, months: months.length };
}

/** Availability totals of one connection over some span. */
export interface AvailabilityTotals {
  connection_id: string;
  /** Start of the UTC day (or month, for rows from the monthly rollup). */
  bucket: Date;
  checks: number;
  available: number;
  response_ms_sum: number;
  response_ms_count: number;
}

/**
 * Availability per connection and UTC day over [since, until): days before yesterday from the
 * daily rollup, which outlives raw samples; yesterday and today from raw samples, exact to the
 * moment. `since` is taken from the start of its day.
 */
export async function availabilityByDay(
  ctx: AppContext,
  scope: Filter,
  since: Date,
  until: Date,
): Promise<AvailabilityTotals[]> {
  const split = rawFrom(ctx.now());
  const from = dayStart(since);
  const out: AvailabilityTotals[] = [];
  const tasks: Promise<void>[] = [];
  if (from < split && from < until)
    tasks.push(
      ctx.stores.series
        .page(availabilityDaily, {
          where: [scope],
          since: from,
          until: new Date(Math.min(split.getTime(), until.getTime())),
          limit: 1_000_000,
        })
        .then((p) => {
          for (const r of p.rows) out.push({ ...r, bucket: r.ts });
        }),
    );
  if (until > split)
    tasks.push(
      ctx.stores.series
        .aggregate(availabilitySamples, {
          bucket: "day",
          where: [scope],
          since: new Date(Math.max(split.getTime(), from.getTime())),
          until,
          groupBy: ["connection_id"],
          measures: SAMPLE_MEASURES,
        })
        .then((rows) => {
          for (const r of rows) {
            const { ts, ...rest } = toRollup(r);
            out.push({ ...rest, bucket: ts });
          }
        }),
    );
  await Promise.all(tasks);
  return out;
}

/** Monthly rollup rows over [since, until) (months older than the daily rollup keeps). */
export async function availabilityByMonth(ctx: AppContext, scope: Filter, since: Date, until: Date) {
  const p = await ctx.stores.series.page(availabilityMonthly, {
    where: [scope],
    since: monthStart(since),
    until,
    limit: 1_000_000,
  });
  return p.rows.map(({ ts, ...r }): AvailabilityTotals => ({ ...r, bucket: ts }));
}
