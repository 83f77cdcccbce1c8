import type { AppContext } from "../core/context.js";
import { anomalyBuckets, type RowOf } from "../stores/series/tables.js";
import { sourceRows } from "./windows.js";

export const BUCKET_MS = 5 * 60_000;
export const bucketStart = (ms: number) => Math.floor(ms / BUCKET_MS) * BUCKET_MS;

/** Buckets rolled up per slice: 15 minutes of 10,000 connections are about 250,000 rows in memory. */
const SLICE_MS = 3 * BUCKET_MS;
/**
 * Rows per write, each awaited before the next: a roll-up never fills the series store's queue,
 * whose length is what turns heartbeats away with 503 (INGEST_MAX_BACKLOG_ROWS).
 */
const WRITE_BATCH = 5_000;

/**
 * Rolls the raw tables up into the 5-minute buckets the baselines are read from
 * (`anomaly_buckets`), for [since, until) (both on 5-minute boundaries), for `connections` only
 * when given, 15 minutes at a time; `saved` is told how far it got after each slice, once that
 * slice's rows are readable. Idempotent: a bucket rolled again replaces its rows (upsert keys),
 * so a run repeated after a crash or redone for late rows writes the same numbers. Resolves with
 * the rows written.
 */
export async function rollBuckets(
  ctx: AppContext,
  since: Date,
  until: Date,
  opts: { connections?: string[]; saved?: (through: Date) => Promise<void> } = {},
): Promise<number> {
  const series = ctx.stores.series;
  let written = 0;
  for (let from = since.getTime(); from < until.getTime(); from += SLICE_MS) {
    const to = new Date(Math.min(from + SLICE_MS, until.getTime()));
    const rows: RowOf<typeof anomalyBuckets>[] = (
      await sourceRows(series, {
        bucket: "five_minutes",
        since: new Date(from),
        until: to,
        connections: opts.connections,
      })
    ).map((r) => ({
      ts: r.ts,
      connection_id: r.connection_id,
      metric: r.metric,
      bin: r.bin,
      n: r.n,
      total: r.total,
    }));
    for (let i = 0; i < rows.length; i += WRITE_BATCH)
      await series.append(anomalyBuckets, rows.slice(i, i + WRITE_BATCH));
    written += rows.length;
    if (opts.saved) {
      await series.waitVisible();
      await opts.saved(to);
    }
  }
  if (!opts.saved) await series.waitVisible();
  return written;
}
