import { mean, median, medianAbsoluteDeviation, standardDeviation } from "simple-statistics";

/**
 * The detector's metrics, each one number per connection and window (src/anomalies/windows.ts):
 * - `response_time`: p95 response time (ms) of the window's successful, non-synthetic checks;
 * - `failure_rate`: failed / all non-synthetic checks (0..1);
 * - `execution_failure_rate`: `error` / (`success` + `error`) executions started in the window;
 * - `gateway_latency`: p95 of the latency (ms) gateway heartbeats report;
 * - `token_volume`: tokens of the window, heartbeat input + output tokens plus usage entries
 *   whose usage_entity is `tokens` (as `PUT /v1/usage` counts them);
 * - `token_spend`: US dollars of the window, heartbeat `cost_usd` plus usage-entry cents / 100
 *   (the unit `PUT /v1/usage` totals in).
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

/** Rows a window needs to count (as the observed window or as a baseline window). */
export const MIN_WINDOW_SAMPLES: Record<AnomalyMetric, number> = {
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
 * median. The floors of the sums (tokens, spend) are per hour and scale with the window's length.
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

/** Metrics whose value is a sum over the window, so their floor scales with its length. */
export const SUM_METRICS: ReadonlySet<AnomalyMetric> = new Set(["token_volume", "token_spend"]);

/** MAD times this estimates the standard deviation of normally distributed values. */
export const MAD_TO_SIGMA = 1.4826;

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

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

/** A baseline's band, before any observation: what a window is judged against. */
export type Band = Omit<Judgement, "score" | "outside">;

/**
 * The band of the baseline windows' values, by median and MAD (simple-statistics). Null when
 * fewer than `minWindows` baseline windows have data (a new connection never alarms).
 * `windowMinutes` scales the floor of the sums (tokens, spend), which is per hour.
 */
export function band(
  metric: AnomalyMetric,
  baseline: readonly number[],
  threshold: number,
  minWindows: number,
  windowMinutes = 60,
): Band | null {
  if (baseline.length < minWindows || baseline.length === 0) return null;
  const values = [...baseline];
  const med = median(values);
  const mad = medianAbsoluteDeviation(values);
  const floor = SUM_METRICS.has(metric) ? (SCALE_FLOOR[metric] * windowMinutes) / 60 : SCALE_FLOOR[metric];
  const scale = Math.max(MAD_TO_SIGMA * mad, floor, RELATIVE_SCALE_FLOOR * Math.abs(med));
  return {
    median: med,
    mad,
    mean: mean(values),
    stddev: values.length > 1 ? standardDeviation(values) : 0,
    scale,
    low: Math.max(0, med - threshold * scale),
    high: med + threshold * scale,
  };
}

/** Where `observed` falls against a band. */
export function against(b: Band, observed: number): Judgement {
  return { ...b, score: (observed - b.median) / b.scale, outside: observed > b.high };
}

/**
 * Judges `observed` against the baseline windows' values (see {@link band}); null when there is
 * not enough baseline.
 */
export function judge(
  metric: AnomalyMetric,
  observed: number,
  baseline: readonly number[],
  threshold: number,
  minWindows: number,
  windowMinutes = 60,
): Judgement | null {
  const b = band(metric, baseline, threshold, minWindows, windowMinutes);
  return b ? against(b, observed) : null;
}
