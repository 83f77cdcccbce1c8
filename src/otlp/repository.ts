import type { Queryable } from "../stores/relational/types.js";

/** Every statement on the OTLP tables (sql/postgres/030_otlp_series.sql). */

/** An instance's cumulative series state as stored: its version and text (cumulative.ts). */
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

/** A state to write if the stored one is still at `version` (null: if there is none yet). */
export interface StateSwap {
  connectionId: string;
  instance: string;
  version: number | null;
  state: string;
}

function joinStates(swaps: readonly StateSwap[]): string {
  let out = "";
  for (let i = 0; i < swaps.length; i++) {
    const state = (swaps[i] as StateSwap).state;
    if (state.includes("|")) throw new Error("a state holds a '|': not format 2");
    out += i === 0 ? state : `|${state}`;
  }
  return out;
}

/**
 * Writes each state whose stored version is still the one given (compare and set), all in one
 * statement and one commit, and answers the versions of those written (by `connectionId\ninstance`);
 * the others were changed by another process first. A new row's version starts at the time in
 * milliseconds, never at 1 again: a process that still holds a version of a row the retention job
 * deleted can never find it matching the row made after.
 */
export async function swapInstanceStates(
  db: Queryable,
  swaps: readonly StateSwap[],
  now: Date,
): Promise<Map<string, number>> {
  const r = await db.query<{ connection_id: string; instance: string; version: string | number }>(
    `WITH u AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], string_to_array($4, '|')) AS u(connection_id, instance, version, state)
     ), updated AS (
       UPDATE otlp_series AS s SET version = s.version + 1, state = u.state, updated_at = $5
         FROM u
        WHERE u.version IS NOT NULL AND s.connection_id = u.connection_id AND s.instance = u.instance
          AND s.version = u.version
       RETURNING s.connection_id, s.instance, s.version
     ), inserted AS (
       INSERT INTO otlp_series (connection_id, instance, version, state, updated_at)
       SELECT connection_id, instance, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, state, $5
         FROM u WHERE u.version IS NULL
       ON CONFLICT (connection_id, instance) DO NOTHING
       RETURNING connection_id, instance, version
     )
     SELECT connection_id, instance, version FROM updated
     UNION ALL SELECT connection_id, instance, version FROM inserted`,
    [
      swaps.map((s) => s.connectionId),
      swaps.map((s) => s.instance),
      swaps.map((s) => s.version),
      // one text, not a text array: a state never holds a "|" (cumulative.ts, format 2), and so
      // needs no escaping element by element (a text array's cost, for states of kilobytes)
      joinStates(swaps),
      now,
    ],
    { prepare: "otlp_state_swap" },
  );
  return new Map(r.rows.map((row) => [`${row.connection_id}\n${row.instance}`, Number(row.version)]));
}

/**
 * Removes the states of instances that have not exported since `before` (every series in them is
 * older than any point Vigil still takes, so none can be continued): gateways renamed, scaled
 * down or gone leave no rows behind. Answers how many were removed.
 */
export async function expireInstanceStates(db: Queryable, before: Date): Promise<number> {
  const r = await db.query("DELETE FROM otlp_series WHERE updated_at < $1", [before]);
  return r.rowCount;
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
