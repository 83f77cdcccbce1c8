import { mean, median, medianAbsoluteDeviation, standardDeviation } from "simple-statistics";
import type { SeriesStore } from "../stores/series/types.js";
import { availabilitySamples, executions, gatewayHeartbeats, usageEntries } from "../stores/series/tables.js";

/**
 * The detector's metrics, each one number per connection and UTC calendar hour, aggregated in
 * the series store (`SAMPLE BY 1h` on QuestDB, `date_trunc('hour')` on SQL), never from raw rows
 * in Node:
 * - `response_time`: p95 response time (ms) of the hour's successful, non-synthetic checks;
 * - `failure_rate`: failed / all non-synthetic checks (0..1);
 * - `execution_failure_rate`: `error` / (`success` + `error`) executions started in the hour;
 * - `gateway_latency`: p95 of the latency (ms) gateway heartbeats report;
 * - `token_volume`: tokens of the hour, heartbeat input + output tokens plus usage entries whose
 *   usage_entity is `tokens` (as `PUT /v1/usage` counts them);
 * - `token_spend`: US dollars of the hour, heartbeat `cost_usd` plus usage-entry cents / 100
 *   (the unit `PUT /v1/usage` totals in).
 *
 * The p95 is the exact nearest-rank value on both backends (`percentile_disc` on SQL, window
 * functions on QuestDB), so both judge alike.
 */
export const ANOMALY_METRICS = [
  "response_time",
  "failure_rate",
  "execution_failure_rate",
  "gateway_latency",
  "token_volume",
  "token_spend",
] as const;
export type AnomalyMetric = (typeof ANOMALY_METRICS)[number];

/** One connection's hour: the metric's value and how many rows it stands on. */
export interface HourValue {
  value: number;
  samples: number;
}

/** Rows an hour needs to count (as the observed window or as a baseline hour). */
export const MIN_HOUR_SAMPLES: Record<AnomalyMetric, number> = {
  response_time: 3,
  failure_rate: 3,
  execution_failure_rate: 3,
  gateway_latency: 3,
  token_volume: 1,
  token_spend: 1,
};

/**
 * The smallest scale a band may have, so a flat baseline (MAD 0) does not turn the slightest
 * change into an anomaly: the larger of an absolute floor in the metric's unit and 10% of the
 * median.
 */
export const SCALE_FLOOR: Record<AnomalyMetric, number> = {
  response_time: 10, // ms
  failure_rate: 0.05,
  execution_failure_rate: 0.05,
  gateway_latency: 10, // ms
  token_volume: 1_000, // tokens per hour
  token_spend: 0.05, // USD per hour
};
export const RELATIVE_SCALE_FLOOR = 0.1;

/** MAD times this estimates the standard deviation of normally distributed values. */
export const MAD_TO_SIGMA = 1.4826;

export const HOUR_MS = 3_600_000;

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Every metric's value per connection in one hour. */
export type HourValues = Map<AnomalyMetric, Map<string, HourValue>>;

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

/** A baseline and where an observation falls against it. */
export interface Judgement {
  median: number;
  mad: number;
  mean: number;
  stddev: number;
  /** The scale of the band: max(1.4826 · MAD, the metric's floor). */
  scale: number;
  low: number;
  high: number;
  /** Robust z: (observed − median) / scale. */
  score: number;
  /** Above the band (only increases are anomalies: a faster or cheaper hour is not an alarm). */
  outside: boolean;
}

/**
 * Judges `observed` against the baseline hours' values with median and MAD (simple-statistics).
 * Null when fewer than `minHours` baseline hours have data (a new connection never alarms).
 */
export function judge(
  metric: AnomalyMetric,
  observed: number,
  baseline: readonly number[],
  threshold: number,
  minHours: number,
): Judgement | null {
  if (baseline.length < minHours || baseline.length === 0) return null;
  const values = [...baseline];
  const med = median(values);
  const mad = medianAbsoluteDeviation(values);
  const scale = Math.max(MAD_TO_SIGMA * mad, SCALE_FLOOR[metric], RELATIVE_SCALE_FLOOR * Math.abs(med));
  const high = med + threshold * scale;
  const low = Math.max(0, med - threshold * scale);
  const score = (observed - med) / scale;
  return {
    median: med,
    mad,
    mean: mean(values),
    stddev: values.length > 1 ? standardDeviation(values) : 0,
    scale,
    low,
    high,
    score,
    outside: observed > high,
  };
}
