/** Reading a Prometheus text exposition (GET /metrics) in a benchmark: histogram deltas and counters. */

/** A histogram's cumulative bucket counts by upper bound (`+Inf` as Infinity), and its count. */
export interface Histogram {
  buckets: Map<number, number>;
  count: number;
}

/** The unlabelled histogram `name` of an exposition (its `_bucket` and `_count` lines). */
export function histogramOf(text: string, name: string): Histogram {
  const buckets = new Map<number, number>();
  let count = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}_bucket{`)) {
      const m = /le="([^"]+)"\}\s+(\S+)/.exec(line);
      if (m) buckets.set(m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2]));
    } else if (line.startsWith(`${name}_count`)) count = Number(line.split(/\s+/).at(-1));
  }
  return { buckets, count };
}

/** What a histogram observed between two readings of it. */
export function histogramDelta(before: Histogram, after: Histogram): Histogram {
  const buckets = new Map<number, number>();
  for (const [le, n] of after.buckets) buckets.set(le, n - (before.buckets.get(le) ?? 0));
  return { buckets, count: after.count - before.count };
}

/**
 * The q-quantile of a histogram: the upper bound of the bucket that holds it (what can be said
 * for sure) and the linear estimate inside that bucket (as PromQL's histogram_quantile). NaN
 * without observations.
 */
export function histogramQuantile(h: Histogram, q: number): { upTo: number; estimate: number } {
  if (h.count <= 0) return { upTo: Number.NaN, estimate: Number.NaN };
  const rank = q * h.count;
  let lower = 0;
  let below = 0;
  for (const [le, n] of [...h.buckets].sort((a, b) => a[0] - b[0])) {
    if (n >= rank) {
      if (le === Infinity) return { upTo: Infinity, estimate: lower };
      const inBucket = n - below;
      const estimate = inBucket > 0 ? lower + ((le - lower) * (rank - below)) / inBucket : le;
      return { upTo: le, estimate };
    }
    lower = le;
    below = n;
  }
  return { upTo: Infinity, estimate: lower };
}

/** The sum over every series of a counter (all its label sets). */
export function counterSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n"))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(/\s+/).at(-1));
  return sum;
}
