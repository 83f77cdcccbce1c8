import type { Plan } from "../identity/plans.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * Retention's relational state: each connection's plan (what its raw samples are kept for), and
 * the rollup bookkeeping (`rollup_state`: how far the daily rollup reached; `rollup_dirty`:
 * past days that received a late sample since).
 */

/** The plan of each connection's account (the organization's for an organization connection). */
export async function selectConnectionPlans(
  db: Queryable,
  ids?: readonly string[],
): Promise<{ id: string; plan: Plan }[]> {
  const r = await db.query<{ id: string; plan: Plan }>(
    `SELECT c.id, coalesce(o.plan, u.plan) AS plan
       FROM connections c JOIN users u ON u.id = c.user_id
       LEFT JOIN organizations o ON o.id = c.organization_id` + (ids ? " WHERE c.id = ANY($1::text[])" : ""),
    ids ? [[...ids]] : [],
  );
  return r.rows;
}

export async function selectRollupState(
  db: Queryable,
): Promise<{ rolledThrough: Date | null; partialThrough: Date | null; dirty: Date[] }> {
  const r = await db.query<{
    rolled_through: Date | null;
    partial_through: Date | null;
    dirty: Date[] | null;
  }>(
    `SELECT (SELECT rolled_through FROM rollup_state WHERE id = 1) AS rolled_through,
            (SELECT partial_through FROM rollup_state WHERE id = 1) AS partial_through,
            (SELECT array_agg(day ORDER BY day) FROM rollup_dirty) AS dirty`,
  );
  const row = r.rows[0];
  return {
    rolledThrough: row?.rolled_through ? new Date(row.rolled_through) : null,
    partialThrough: row?.partial_through ? new Date(row.partial_through) : null,
    dirty: (row?.dirty ?? []).map((d) => new Date(d)),
  };
}

/** Marks days dirty as of `at` (a later mark of the same day wins). */
export async function markDaysDirty(db: Queryable, days: readonly Date[], at: Date): Promise<void> {
  await db.query(
    `INSERT INTO rollup_dirty (day, marked_at)
     SELECT d, $2 FROM unnest($1::timestamptz[]) d
     ON CONFLICT (day) DO UPDATE SET marked_at = greatest(rollup_dirty.marked_at, excluded.marked_at)`,
    [days.map((d) => d.toISOString()), at.toISOString()],
  );
}

/**
 * Records a run that started at `started` and rolled everything before `watermark` up (whole days
 * into the daily rollup, the watermark's own day into partial rows dated `watermark`), and clears
 * the dirty marks made before it started: those samples were visible to it.
 */
export async function recordRollupRun(db: Queryable, started: Date, watermark: Date): Promise<void> {
  await db.query(
    `INSERT INTO rollup_state (id, rolled_through, partial_through) VALUES (1, $1, $1)
     ON CONFLICT (id) DO UPDATE SET
       rolled_through = greatest(rollup_state.rolled_through, excluded.rolled_through),
       partial_through = greatest(rollup_state.partial_through, excluded.partial_through)`,
    [watermark.toISOString()],
  );
  await db.query("DELETE FROM rollup_dirty WHERE marked_at <= $1", [started.toISOString()]);
}
