import pLimit from "p-limit";
import { ANOMALY_METRICS, type AnomalyMetric } from "../../src/anomalies/baselines.js";
import {
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  usageEntries,
} from "../../src/stores/series/tables.js";
import type { SeriesStore } from "../../src/stores/series/types.js";

/**
 * The hourly detector's reads: 8 hours × 4 aggregates per run, kept here as the benchmark's
 * baseline (`npm run bench -- detect-latency`). Until #30 the anomaly detector judged the last
 * complete UTC hour against the same hour on the 7 days before, and read those 8 hours on every
 * run (every 300 s by default), whether or not it had judged that hour already. This is its
 * `hourValues` as it was in src/anomalies/baselines.ts (commit 5c7d6e4), and the way its run
 * read the hours (two at a time); its judging and writes are not kept.
 */

export const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** One connection's hour: the metric's value and how many rows it stands on. */
export interface HourValue {
  value: number;
  samples: number;
}

/** Every metric's value per connection in one hour. */
export type HourValues = Map<AnomalyMetric, Map<string, HourValue>>;

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/**
 * Every connection's value of every metric in the hour starting at `start`, from the series
 * store: one aggregate per table, grouped by connection, one after another (so a run never holds
 * more than one of the store's connections, however many hours it reads).
 */
export async function hourValues(series: SeriesStore, start: Date): Promise<HourValues> {
  // the range is the hour: one row per group over it (percentiles need `all` on QuestDB)
  const range = { bucket: "all" as const, since: start, until: new Date(start.getTime() + HOUR_MS) };
  const checks = await series.aggregate(availabilitySamples, {
    ...range,
    where: [{ column: "synthetic", op: "eq", value: false }],
    groupBy: ["connection_id", "available"],
    measures: {
      n: { fn: "count" },
      p95: { fn: "percentile", column: "response_time_ms", p: 0.95 },
      timed: { fn: "count", column: "response_time_ms" },
    },
  });
  const runs = await series.aggregate(executions, {
    ...range,
    where: [{ column: "status", op: "in", value: ["success", "error"] }],
    groupBy: ["connection_id", "status"],
    measures: { n: { fn: "count" } },
  });
  const beats = await series.aggregate(gatewayHeartbeats, {
    ...range,
    groupBy: ["connection_id"],
    measures: {
      n: { fn: "count" },
      usd: { fn: "sum", column: "cost_usd" },
      input: { fn: "sum", column: "input_tokens" },
      output: { fn: "sum", column: "output_tokens" },
      p95: { fn: "percentile", column: "latency_ms", p: 0.95 },
      timed: { fn: "count", column: "latency_ms" },
    },
  });
  const entries = await series.aggregate(usageEntries, {
    ...range,
    groupBy: ["connection_id", "usage_entity"],
    measures: {
      n: { fn: "count" },
      cents: { fn: "sum", column: "cost_cents" },
      amount: { fn: "sum", column: "usage_amount" },
    },
  });

  const out: HourValues = new Map(ANOMALY_METRICS.map((m) => [m, new Map<string, HourValue>()]));
  const put = (metric: AnomalyMetric, id: string, value: number, samples: number) =>
    out.get(metric)?.set(id, { value, samples });
  const add = (metric: AnomalyMetric, id: string, value: number, samples: number) => {
    const v = out.get(metric)?.get(id) ?? { value: 0, samples: 0 };
    put(metric, id, v.value + value, v.samples + samples);
  };
  const truthy = (v: unknown) => v === true || v === "true" || v === "t" || v === 1;

  // checks: the failure rate over all of them, the p95 over the successful ones
  const counts = new Map<string, { all: number; ok: number }>();
  for (const r of checks) {
    const id = String(r.connection_id);
    const c = counts.get(id) ?? { all: 0, ok: 0 };
    c.all += num(r.n);
    if (truthy(r.available)) {
      c.ok += num(r.n);
      if (r.p95 !== null && num(r.timed) > 0) put("response_time", id, num(r.p95), num(r.timed));
    }
    counts.set(id, c);
  }
  for (const [id, c] of counts) if (c.all > 0) put("failure_rate", id, (c.all - c.ok) / c.all, c.all);

  const outcomes = new Map<string, { error: number; all: number }>();
  for (const r of runs) {
    const id = String(r.connection_id);
    const c = outcomes.get(id) ?? { error: 0, all: 0 };
    c.all += num(r.n);
    if (r.status === "error") c.error += num(r.n);
    outcomes.set(id, c);
  }
  for (const [id, c] of outcomes) if (c.all > 0) put("execution_failure_rate", id, c.error / c.all, c.all);

  for (const r of beats) {
    const id = String(r.connection_id);
    const n = num(r.n);
    if (r.p95 !== null && num(r.timed) > 0) put("gateway_latency", id, num(r.p95), num(r.timed));
    add("token_volume", id, num(r.input) + num(r.output), n);
    add("token_spend", id, num(r.usd), n);
  }
  for (const r of entries) {
    const id = String(r.connection_id);
    const n = num(r.n);
    if (r.usage_entity === "tokens") add("token_volume", id, num(r.amount), n);
    add("token_spend", id, num(r.cents) / 100, n);
  }
  return out;
}

/** Start of the hour the hourly detector judged at `now`: the last one that ended 2 minutes before. */
export function hourlyWindowStart(now: Date): Date {
  return new Date(Math.floor((now.getTime() - 2 * 60_000) / HOUR_MS) * HOUR_MS - HOUR_MS);
}

/**
 * One hourly detector run's reads: the window hour and the same hour on each of the 7 days
 * before, two hours at a time, each hour's aggregates one after another (as its run read them).
 * Answers the values per hour, the window first.
 */
export async function hourlyReads(series: SeriesStore, window: Date): Promise<HourValues[]> {
  const hours = [0, 1, 2, 3, 4, 5, 6, 7].map((d) => new Date(window.getTime() - d * DAY_MS));
  const limit = pLimit(2);
  return Promise.all(hours.map((h) => limit(() => hourValues(series, h))));
}
