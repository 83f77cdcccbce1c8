import type { Queryable } from "../stores/relational/types.js";
import type { SeriesState } from "./map.js";

/** Every statement on otlp_series (sql/postgres/030_otlp_series.sql). */

interface StateRow extends Record<string, unknown> {
  series_key: string;
  start_ns: string | number | bigint;
  time_ns: string | number | bigint;
  value: number;
  count: number;
  prev_start_ns: string | number | bigint | null;
  prev_time_ns: string | number | bigint | null;
  prev_value: number | null;
  prev_count: number | null;
}

const big = (v: string | number | bigint) => BigInt(v);

/** The states of a connection's series among `keys`, locked until the transaction ends. */
export async function lockSeries(
  tx: Queryable,
  connectionId: string,
  keys: string[],
): Promise<Map<string, SeriesState>> {
  const r = await tx.query<StateRow>(
    `SELECT series_key, start_ns::text AS start_ns, time_ns::text AS time_ns, value, count,
            prev_start_ns::text AS prev_start_ns, prev_time_ns::text AS prev_time_ns, prev_value, prev_count
       FROM otlp_series WHERE connection_id = $1 AND series_key = ANY($2::text[])
      ORDER BY series_key FOR UPDATE`,
    [connectionId, keys],
  );
  const out = new Map<string, SeriesState>();
  for (const row of r.rows)
    out.set(row.series_key, {
      startNs: big(row.start_ns),
      timeNs: big(row.time_ns),
      value: Number(row.value),
      count: Number(row.count),
      prev:
        row.prev_time_ns === null || row.prev_start_ns === null
          ? null
          : {
              startNs: big(row.prev_start_ns),
              timeNs: big(row.prev_time_ns),
              value: Number(row.prev_value),
              count: Number(row.prev_count),
            },
    });
  return out;
}

/** Writes the new states (one row per key). */
export async function saveSeries(
  tx: Queryable,
  connectionId: string,
  states: Map<string, SeriesState>,
): Promise<void> {
  if (states.size === 0) return;
  const keys: string[] = [];
  const starts: string[] = [];
  const times: string[] = [];
  const values: number[] = [];
  const counts: number[] = [];
  const prevStarts: (string | null)[] = [];
  const prevTimes: (string | null)[] = [];
  const prevValues: (number | null)[] = [];
  const prevCounts: (number | null)[] = [];
  for (const [k, s] of states) {
    keys.push(k);
    starts.push(String(s.startNs));
    times.push(String(s.timeNs));
    values.push(s.value);
    counts.push(s.count);
    prevStarts.push(s.prev ? String(s.prev.startNs) : null);
    prevTimes.push(s.prev ? String(s.prev.timeNs) : null);
    prevValues.push(s.prev ? s.prev.value : null);
    prevCounts.push(s.prev ? s.prev.count : null);
  }
  await tx.query(
    `INSERT INTO otlp_series AS s (connection_id, series_key, start_ns, time_ns, value, count,
                                   prev_start_ns, prev_time_ns, prev_value, prev_count)
     SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[],
                              $7::bigint[], $8::bigint[], $9::float8[], $10::float8[])
     ON CONFLICT (connection_id, series_key) DO UPDATE SET
       start_ns = excluded.start_ns, time_ns = excluded.time_ns, value = excluded.value, count = excluded.count,
       prev_start_ns = excluded.prev_start_ns, prev_time_ns = excluded.prev_time_ns,
       prev_value = excluded.prev_value, prev_count = excluded.prev_count`,
    [connectionId, keys, starts, times, values, counts, prevStarts, prevTimes, prevValues, prevCounts],
  );
}

/** The key of the row that marks a connection as exporting GenAI token metrics. */
export const TOKEN_METRICS_MARK = "";

/** Marks (or re-marks) the connection as one that exports GenAI token metrics. */
export async function markTokenMetrics(db: Queryable, connectionId: string, nowNs: bigint): Promise<void> {
  await db.query(
    `INSERT INTO otlp_series (connection_id, series_key, start_ns, time_ns, value, count)
     VALUES ($1, '', $2, $2, 0, 0)
     ON CONFLICT (connection_id, series_key) DO UPDATE SET time_ns = excluded.time_ns`,
    [connectionId, String(nowNs)],
  );
}

/** When the connection last exported GenAI token metrics (ms), or null. */
export async function tokenMetricsMarkedAt(db: Queryable, connectionId: string): Promise<number | null> {
  const r = await db.query<{ time_ns: string }>(
    `SELECT time_ns::text AS time_ns FROM otlp_series WHERE connection_id = $1 AND series_key = ''`,
    [connectionId],
  );
  const row = r.rows[0];
  return row ? Number(BigInt(row.time_ns) / 1_000_000n) : null;
}
