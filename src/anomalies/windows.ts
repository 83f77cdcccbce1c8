import {
  anomalyBuckets,
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  usageEntries,
} from "../stores/series/tables.js";
import type { Bucket, Filter, SeriesStore } from "../stores/series/types.js";
import type { AnomalyMetric } from "./baselines.js";

/**
 * What the detector reads: per connection, metric and bucket (a minute or 5 minutes), a count `n`
 * and a `total`, and for the percentile metrics one such pair per logarithmic bin of the values
 * (`bin` ≥ 0; −1 for the other metrics). Summing the rows of a window gives its numbers;
 * {@link valueOf} turns them into the metric's value. Every number comes from an aggregate in the
 * series store, never from raw rows in Node.
 */
export interface MetricRow {
  ts: Date;
  connection_id: string;
  metric: AnomalyMetric;
  bin: number;
  n: number;
  total: number;
}

/** Bins per doubling of a latency: neighbouring bins differ by 2^(1/16), 4.4%. */
export const PER_DOUBLING = 16;
const NO_BIN = -1;

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
const truthy = (v: unknown) => v === true || v === "true" || v === "t" || v === 1;

/**
 * The detector's numbers per connection and `bucket` (`all`: one, dated `since`) over [since, until) from the raw tables, six
 * aggregates one after another (one store connection at a time). `connections` limits them to
 * those connections (the catch-up works through the fleet in chunks).
 */
export async function sourceRows(
  series: SeriesStore,
  q: {
    bucket: Extract<Bucket, "minute" | "five_minutes" | "all">;
    since: Date;
    until: Date;
    connections?: string[];
  },
): Promise<MetricRow[]> {
  const only: Filter[] = q.connections ? [{ column: "connection_id", op: "in", value: q.connections }] : [];
  const range = { bucket: q.bucket, since: q.since, until: q.until };
  const out: MetricRow[] = [];
  const push = (
    r: { bucket: Date | null },
    id: unknown,
    metric: AnomalyMetric,
    bin: number,
    n: number,
    total: number,
  ) => out.push({ ts: r.bucket ?? q.since, connection_id: String(id), metric, bin, n, total });

  // the metrics of one row per connection and bucket (rates, tokens, spend): what the aggregates
  // below add up to, heartbeats and usage entries together
  const sums = new Map<
    string,
    { r: { bucket: Date | null }; id: unknown; metric: AnomalyMetric; n: number; total: number }
  >();
  const add = (r: { bucket: Date | null }, id: unknown, metric: AnomalyMetric, n: number, total: number) => {
    const key = `${(r.bucket ?? q.since).getTime()}/${id}/${metric}`;
    const s = sums.get(key) ?? { r, id, metric, n: 0, total: 0 };
    s.n += n;
    s.total += total;
    sums.set(key, s);
  };
  const checks = await series.aggregate(availabilitySamples, {
    ...range,
    where: [...only, { column: "synthetic", op: "eq", value: false }],
    groupBy: ["connection_id", "available"],
    measures: { n: { fn: "count" } },
  });
  // one failure_rate row per connection and bucket: all checks, of which failed
  for (const r of checks)
    add(r, r.connection_id, "failure_rate", num(r.n), truthy(r.available) ? 0 : num(r.n));

  const times = await series.aggregate(availabilitySamples, {
    ...range,
    where: [
      ...only,
      { column: "synthetic", op: "eq", value: false },
      { column: "available", op: "eq", value: true },
    ],
    groupBy: ["connection_id"],
    bin: { column: "response_time_ms", perDoubling: PER_DOUBLING },
    measures: {
      n: { fn: "count", column: "response_time_ms" },
      total: { fn: "sum", column: "response_time_ms" },
    },
  });
  for (const r of times)
    if (r.bin !== null && num(r.n) > 0)
      push(r, r.connection_id, "response_time", num(r.bin), num(r.n), num(r.total));

  const runs = await series.aggregate(executions, {
    ...range,
    where: [...only, { column: "status", op: "in", value: ["success", "error"] }],
    groupBy: ["connection_id", "status"],
    measures: { n: { fn: "count" } },
  });
  for (const r of runs)
    add(r, r.connection_id, "execution_failure_rate", num(r.n), r.status === "error" ? num(r.n) : 0);

  const beats = await series.aggregate(gatewayHeartbeats, {
    ...range,
    where: only,
    groupBy: ["connection_id"],
    measures: {
      n: { fn: "count" },
      usd: { fn: "sum", column: "cost_usd" },
      input: { fn: "sum", column: "input_tokens" },
      output: { fn: "sum", column: "output_tokens" },
    },
  });
  for (const r of beats) {
    add(r, r.connection_id, "token_volume", num(r.n), num(r.input) + num(r.output));
    add(r, r.connection_id, "token_spend", num(r.n), num(r.usd));
  }
  const latency = await series.aggregate(gatewayHeartbeats, {
    ...range,
    where: only,
    groupBy: ["connection_id"],
    bin: { column: "latency_ms", perDoubling: PER_DOUBLING },
    measures: { n: { fn: "count", column: "latency_ms" }, total: { fn: "sum", column: "latency_ms" } },
  });
  for (const r of latency)
    if (r.bin !== null && num(r.n) > 0)
      push(r, r.connection_id, "gateway_latency", num(r.bin), num(r.n), num(r.total));
  const entries = await series.aggregate(usageEntries, {
    ...range,
    where: only,
    groupBy: ["connection_id", "usage_entity"],
    measures: {
      n: { fn: "count" },
      cents: { fn: "sum", column: "cost_cents" },
      amount: { fn: "sum", column: "usage_amount" },
    },
  });
  for (const r of entries) {
    if (r.usage_entity === "tokens") add(r, r.connection_id, "token_volume", num(r.n), num(r.amount));
    add(r, r.connection_id, "token_spend", num(r.n), num(r.cents) / 100);
  }
  for (const s of sums.values()) push(s.r, s.id, s.metric, NO_BIN, s.n, s.total);
  return out;
}

/** The rolled-up 5-minute buckets over [since, until) (src/anomalies/buckets.ts). */
export async function bucketRows(
  series: SeriesStore,
  q: { since: Date; until: Date; connections?: string[] },
): Promise<MetricRow[]> {
  const rows = await series.aggregate(anomalyBuckets, {
    bucket: "five_minutes",
    since: q.since,
    until: q.until,
    where: q.connections ? [{ column: "connection_id", op: "in", value: q.connections }] : [],
    groupBy: ["connection_id", "metric", "bin"],
    measures: { n: { fn: "sum", column: "n" }, total: { fn: "sum", column: "total" } },
  });
  return rows.map((r) => ({
    ts: r.bucket as Date,
    connection_id: String(r.connection_id),
    metric: String(r.metric) as AnomalyMetric,
    bin: Number(r.bin),
    n: num(r.n),
    total: num(r.total),
  }));
}

/** A window's numbers for one connection and metric: what its rows add up to. */
export class Agg {
  n = 0;
  total = 0;
  /** Percentile metrics: count and total per bin. */
  readonly bins = new Map<number, { n: number; total: number }>();

  add(r: Pick<MetricRow, "bin" | "n" | "total">, sign = 1): void {
    this.n += sign * r.n;
    this.total += sign * r.total;
    if (r.bin < 0) return;
    const b = this.bins.get(r.bin) ?? { n: 0, total: 0 };
    b.n += sign * r.n;
    b.total += sign * r.total;
    if (b.n === 0) this.bins.delete(r.bin);
    else this.bins.set(r.bin, b);
  }
}

const PERCENTILE_METRICS: ReadonlySet<AnomalyMetric> = new Set(["response_time", "gateway_latency"]);

/**
 * The metric's value over a window and the rows it stands on; null without rows. A p95 is the
 * nearest-rank value (rank ceil(0.95 · n)) read from the bins: the mean of the values in the bin
 * holding that rank, within 4.4% of the exact value (exact when the bin's values are alike).
 */
export function valueOf(
  metric: AnomalyMetric,
  a: Agg | undefined,
): { value: number; samples: number } | null {
  if (!a || a.n <= 0) return null;
  if (PERCENTILE_METRICS.has(metric)) {
    const rank = Math.ceil(0.95 * a.n);
    let seen = 0;
    for (const bin of [...a.bins.keys()].sort((x, y) => x - y)) {
      const b = a.bins.get(bin) as { n: number; total: number };
      seen += b.n;
      if (seen >= rank) return { value: b.total / b.n, samples: a.n };
    }
    return null;
  }
  if (metric === "failure_rate" || metric === "execution_failure_rate")
    return { value: a.total / a.n, samples: a.n };
  return { value: a.total, samples: a.n };
}
