import type { AppContext } from "../core/context.js";
import { anomalyBuckets, type RowOf } from "../stores/series/tables.js";
import { sourceRows } from "./windows.js";

export const BUCKET_MS = 5 * 60_000;
export const bucketStart = (ms: number) => Math.floor(ms / BUCKET_MS) * BUCKET_MS;

/**
 * Rolls the raw tables up into the 5-minute buckets the baselines are read from
 * (`anomaly_buckets`), for [since, until) (both on 5-minute boundaries), and for `connections`
 * only when given. Idempotent: a bucket rolled again replaces its rows (upsert keys), so a run
 * repeated after a crash or redone for late rows writes the same numbers. Resolves with the rows
 * written, once they are readable.
 */
export async function rollBuckets(
  ctx: AppContext,
  since: Date,
  until: Date,
  connections?: string[],
): Promise<number> {
  if (until <= since) return 0;
  const series = ctx.stores.series;
  let written = 0;
  // a day at a time, so a first run over 8 days never holds them all in memory
  for (let from = since.getTime(); from < until.getTime(); from += 86_400_000) {
    const to = new Date(Math.min(from + 86_400_000, until.getTime()));
    const rows: RowOf<typeof anomalyBuckets>[] = (
      await sourceRows(series, { bucket: "five_minutes", since: new Date(from), until: to, connections })
    ).map((r) => ({
      ts: r.ts,
      connection_id: r.connection_id,
      metric: r.metric,
      bin: r.bin,
      n: r.n,
      total: r.total,
    }));
    for (let i = 0; i < rows.length; i += 20_000)
      await series.append(anomalyBuckets, rows.slice(i, i + 20_000));
    written += rows.length;
  }
  await series.waitVisible();
  return written;
}
