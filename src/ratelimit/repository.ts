import type { Queryable } from "../stores/relational/types.js";

/**
 * The shared rate-limit counts: one row per scope (an account) and one-hour window in
 * `rate_limit_windows`. Every node adds what it admitted and reads back the total.
 */

/** Adds `count` to one scope's window and returns the shared total. */
export async function addToWindow(
  db: Queryable,
  scope: string,
  windowStart: Date,
  count: number,
): Promise<number | undefined> {
  const r = await db.query<{ count: number }>(
    `INSERT INTO rate_limit_windows (scope, window_start, count) VALUES ($1, $2, $3)
     ON CONFLICT (scope, window_start) DO UPDATE SET count = rate_limit_windows.count + EXCLUDED.count
     RETURNING count`,
    [scope, windowStart.toISOString(), count],
  );
  const total = r.rows[0]?.count;
  return total === undefined ? undefined : Number(total);
}

export interface WindowCount {
  scope: string;
  windowStart: Date;
  count: number;
}

/**
 * Adds many scopes' counts in one statement (however many scopes are active) and returns each
 * shared total, keyed `${scope}@${windowStart ms}`.
 */
export async function addToWindows(db: Queryable, counts: WindowCount[]): Promise<Map<string, number>> {
  const r = await db.query<{ scope: string; window_start: Date; count: number }>(
    `INSERT INTO rate_limit_windows (scope, window_start, count)
     SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::int[])
     ON CONFLICT (scope, window_start) DO UPDATE SET count = rate_limit_windows.count + EXCLUDED.count
     RETURNING scope, window_start, count`,
    [counts.map((c) => c.scope), counts.map((c) => c.windowStart.toISOString()), counts.map((c) => c.count)],
  );
  return new Map(r.rows.map((row) => [windowKey(row.scope, new Date(row.window_start)), Number(row.count)]));
}

export const windowKey = (scope: string, windowStart: Date) => `${scope}@${windowStart.getTime()}`;

/** Forgets windows that ended long ago. */
export async function deleteWindowsBefore(db: Queryable, before: Date): Promise<void> {
  await db.query("DELETE FROM rate_limit_windows WHERE window_start < $1", [before.toISOString()]);
}
