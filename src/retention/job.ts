import type { AppContext } from "../core/context.js";
import {
  availabilityDaily,
  availabilityMonthly,
  anomalyBuckets,
  availabilityPartial,
  availabilitySamples,
} from "../stores/series/tables.js";
import { DAILY_ROLLUP_DAYS, MONTHLY_ROLLUP_YEARS, rawExpiryRules } from "./policy.js";
import { rollUp } from "./rollups.js";
import { expireIdempotencyKeys } from "../usage/repository.js";
import { IDEMPOTENCY_HOURS } from "../usage/record.js";
import { MAX_AGE_MS } from "../otlp/map.js";
import { expireInstanceStates } from "../otlp/repository.js";

const DAY_MS = 86_400_000;

/**
 * Removes what retention no longer keeps: raw availability samples past each connection's plan
 * (docs/operations.md: Retention and rollups), daily rollups past 425 days, monthly ones past 6 years, and the partial
 * rows of the day in progress past two days (reads use only the newest run's), and the OTLP
 * series states of gateway instances silent for 30 days. Resolves with the rows removed per table.
 */
export async function expire(ctx: AppContext): Promise<Record<string, number>> {
  const now = ctx.now();
  const series = ctx.stores.series;
  const raw = await series.expire(availabilitySamples, await rawExpiryRules(ctx.stores.db, now));
  const daily = await series.expire(availabilityDaily, [
    { before: new Date(now.getTime() - DAILY_ROLLUP_DAYS * DAY_MS), keep: [] },
  ]);
  const monthsAgo = new Date(now);
  monthsAgo.setUTCFullYear(monthsAgo.getUTCFullYear() - MONTHLY_ROLLUP_YEARS);
  const monthly = await series.expire(availabilityMonthly, [{ before: monthsAgo, keep: [] }]);
  const partial = await series.expire(availabilityPartial, [
    { before: new Date(now.getTime() - 2 * DAY_MS), keep: [] },
  ]);
  // the anomaly detector's 5-minute buckets: a window, its 7 baseline days and the catch-up
  const buckets = await series.expire(anomalyBuckets, [
    { before: new Date(now.getTime() - 9 * DAY_MS), keep: [] },
  ]);
  const idempotency = await expireIdempotencyKeys(
    ctx.stores.db,
    new Date(now.getTime() - IDEMPOTENCY_HOURS * 3_600_000),
  );
  // OTLP cumulative states of gateway instances silent for longer than a point may be old
  const otlp = await expireInstanceStates(ctx.stores.db, new Date(now.getTime() - MAX_AGE_MS));
  return {
    availability_samples: raw,
    availability_daily: daily,
    availability_monthly: monthly,
    availability_partial: partial,
    anomaly_buckets: buckets,
    usage_idempotency_keys: idempotency,
    otlp_series: otlp,
  };
}

/** Rolls availability up (every 5 minutes in the jobs role, jobs/jobs.ts). */
export async function rollUpJob(ctx: AppContext): Promise<void> {
  const rolled = await rollUp(ctx);
  ctx.log.debug(rolled, "availability rolled up");
}

/** Expires what retention no longer keeps (every hour in the jobs role). */
export async function expireJob(ctx: AppContext): Promise<void> {
  const removed = await expire(ctx);
  ctx.log.info({ removed }, "retention: expired rows removed");
}
