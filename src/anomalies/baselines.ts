import { mean, median, medianAbsoluteDeviation, standardDeviation } from "simple-statistics";
import type { SeriesStore } from "../stores/series/types.js";
import { availabilitySamples, executions, gatewayHeartbeats, usageEntries } from "../stores/series/tables.js";

/**
 * The detector's metrics, each one number per connection and UTC calendar hour, aggregated in
 * the series store (`SAMPLE BY 1h` on QuestDB, `date_trunc('hour')` on SQL), never from raw rows
 * in Node:
 * - `response_time`: mean response time (ms) of the hour's successful, non-synthetic checks;
 * - `failure_rate`: failed / all non-synthetic checks (0..1);
 * - `execution_failure_rate`: `error` / (`success` + `error`) executions started in the hour;
 * - `token_spend`: US dollars of the hour, heartbeat `cost_usd` plus usage-entry cents / 100
 *   (the unit `PUT /v1/usage` totals in).
 */
export const ANOMALY_METRICS = [
  "response_time",
  "failure_rate",
  "execution_failure_rate",
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
  token_spend: 0.05, // USD per hour
};
export const RELATIVE_SCALE_FLOOR = 0.1;

/** MAD times this estimates the standard deviation of normally distributed values. */
export const MAD_TO_SIGMA = 1.4826;

export const HOUR_MS = 3_600_000;

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Every connection's value of `metric` in the hour starting at `start`, from the series store. */
export async function hourValues(
  series: SeriesStore,
  metric: AnomalyMetric,
  start: Date,
): Promise<Map<string, HourValue>> {
  const range = { bucket: "hour" as const, since: start, until: new Date(start.getTime() + HOUR_MS) };
  const out = new Map<string, HourValue>();
  switch (metric) {
    case "response_time": {
      const rows = await series.aggregate(availabilitySamples, {
        ...range,
        where: [
          { column: "synthetic", op: "eq", value: false },
          { column: "available", op: "eq", value: true },
        ],
        groupBy: ["connection_id"],
        measures: {
          ms: { fn: "avg", column: "response_time_ms" },
          n: { fn: "count", column: "response_time_ms" },
        },
      });
      for (const r of rows)
        if (r.ms !== null) out.set(String(r.connection_id), { value: num(r.ms), samples: num(r.n) });
      return out;
    }
    case "failure_rate": {
      const rows = await series.aggregate(availabilitySamples, {
        ...range,
        where: [{ column: "synthetic", op: "eq", value: false }],
        groupBy: ["connection_id"],
        measures: { n: { fn: "count" }, ok: { fn: "countTrue", column: "available" } },
      });
      for (const r of rows) {
        const n = num(r.n);
        if (n > 0) out.set(String(r.connection_id), { value: (n - num(r.ok)) / n, samples: n });
      }
      return out;
    }
    case "execution_failure_rate": {
      const rows = await series.aggregate(executions, {
        ...range,
        where: [{ column: "status", op: "in", value: ["success", "error"] }],
        groupBy: ["connection_id", "status"],
        measures: { n: { fn: "count" } },
      });
      const counts = new Map<string, { error: number; all: number }>();
      for (const r of rows) {
        const c = counts.get(String(r.connection_id)) ?? { error: 0, all: 0 };
        c.all += num(r.n);
        if (r.status === "error") c.error += num(r.n);
        counts.set(String(r.connection_id), c);
      }
      for (const [id, c] of counts) if (c.all > 0) out.set(id, { value: c.error / c.all, samples: c.all });
      return out;
    }
    case "token_spend": {
      const [beats, entries] = await Promise.all([
        series.aggregate(gatewayHeartbeats, {
          ...range,
          groupBy: ["connection_id"],
          measures: { usd: { fn: "sum", column: "cost_usd" }, n: { fn: "count" } },
        }),
        series.aggregate(usageEntries, {
          ...range,
          groupBy: ["connection_id"],
          measures: { cents: { fn: "sum", column: "cost_cents" }, n: { fn: "count" } },
        }),
      ]);
      const add = (id: string, usd: number, n: number) => {
        const v = out.get(id) ?? { value: 0, samples: 0 };
        out.set(id, { value: v.value + usd, samples: v.samples + n });
      };
      for (const r of beats) add(String(r.connection_id), num(r.usd), num(r.n));
      for (const r of entries) add(String(r.connection_id), num(r.cents) / 100, num(r.n));
      return out;
    }
  }
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
