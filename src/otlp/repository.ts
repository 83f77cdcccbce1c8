import type { Queryable } from "../stores/relational/types.js";

/** Every statement on the OTLP tables (sql/postgres/030_otlp_series.sql). */

/** An instance's cumulative series state as stored: its version and JSON text. */
export interface StoredState {
  version: number;
  state: string;
}

/** The stored state of one gateway instance, or null when it has none yet. */
export async function selectInstanceState(
  db: Queryable,
  connectionId: string,
  instance: string,
): Promise<StoredState | null> {
  const r = await db.query<{ version: string | number; state: string }>(
    "SELECT version, state FROM otlp_series WHERE connection_id = $1 AND instance = $2",
    [connectionId, instance],
    { prepare: "otlp_state_select" },
  );
  const row = r.rows[0];
  return row ? { version: Number(row.version), state: row.state } : null;
}

/**
 * Writes an instance's state if it is still at `version` (null: if it has none yet). False when
 * another process changed it first: the caller reads it again and recomputes.
 */
export async function swapInstanceState(
  db: Queryable,
  connectionId: string,
  instance: string,
  version: number | null,
  state: string,
  now: Date,
): Promise<boolean> {
  const r =
    version === null
      ? await db.query(
          `INSERT INTO otlp_series (connection_id, instance, version, state, updated_at)
           VALUES ($1, $2, 1, $3, $4) ON CONFLICT (connection_id, instance) DO NOTHING`,
          [connectionId, instance, state, now],
        )
      : await db.query(
          `UPDATE otlp_series SET version = version + 1, state = $4, updated_at = $5
            WHERE connection_id = $1 AND instance = $2 AND version = $3`,
          [connectionId, instance, version, state, now],
          { prepare: "otlp_state_swap" },
        );
  return r.rowCount === 1;
}

/** Marks (or re-marks) the connection as one that exports GenAI token metrics. */
export async function markTokenMetrics(db: Queryable, connectionId: string, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO otlp_token_metrics (connection_id, last_at) VALUES ($1, $2)
     ON CONFLICT (connection_id) DO UPDATE SET last_at = excluded.last_at`,
    [connectionId, now],
  );
}

/** When the connection last exported GenAI token metrics (ms), or null. */
export async function tokenMetricsMarkedAt(db: Queryable, connectionId: string): Promise<number | null> {
  const r = await db.query<{ last_at: Date | string }>(
    "SELECT last_at FROM otlp_token_metrics WHERE connection_id = $1",
    [connectionId],
  );
  const row = r.rows[0];
  return row ? new Date(row.last_at).getTime() : null;
}
