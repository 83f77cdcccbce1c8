import type { AppContext } from "../core/context.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * Late rows for the anomaly detector. The detector judges a minute 30 seconds after it ends
 * ({@link SETTLE_MS}) and rolls a 5-minute bucket up {@link LATE_MS} after it ends; a row
 * committed more than LATE_MS after its own time (a heartbeat buffered while its daemon was cut
 * off, an execution that finished long after it started, usage dated in the past) missed both, so
 * once it is committed its connection and minute are marked here. The next run rolls the bucket
 * up again, and once the minute has left every window the detector judges it judges that
 * connection's steps around it again (src/anomalies/detect.ts), so late data neither goes
 * unjudged nor opens an anomaly twice. A row less late is in the bucket, and in most of the
 * windows that hold its minute.
 */
export const SETTLE_MS = 30_000;
export const LATE_MS = 5 * 60_000;
const MINUTE_MS = 60_000;

/**
 * Marks the minutes of committed rows that came late. Nearly every call (live heartbeats and
 * checks) has nothing late: no statement and no promise.
 */
export function markLate(
  ctx: AppContext,
  rows: readonly { ts: Date; connection_id: string }[],
): Promise<void> | null {
  const now = ctx.now().getTime();
  const late = now - LATE_MS;
  let marks: Map<string, { connection_id: string; minute: number }> | null = null;
  for (const r of rows) {
    const t = r.ts.getTime();
    if (t >= late) continue;
    const minute = Math.floor(t / MINUTE_MS) * MINUTE_MS;
    marks ??= new Map();
    marks.set(`${r.connection_id}/${minute}`, { connection_id: r.connection_id, minute });
  }
  return marks ? insertLateMarks(ctx.stores.db, [...marks.values()], new Date(now)) : null;
}

async function insertLateMarks(
  db: Queryable,
  marks: { connection_id: string; minute: number }[],
  at: Date,
): Promise<void> {
  for (let i = 0; i < marks.length; i += 5000) {
    const batch = marks.slice(i, i + 5000);
    // a mark made again is due again: rolled up and judged with what it holds now
    await db.query(
      `INSERT INTO anomaly_late_minutes (connection_id, minute, marked_at, rerolled)
       SELECT c, m, $3::timestamptz, false FROM unnest($1::text[], $2::timestamptz[]) AS x(c, m)
       ON CONFLICT (connection_id, minute) DO UPDATE SET
         marked_at = GREATEST(anomaly_late_minutes.marked_at, EXCLUDED.marked_at), rerolled = false`,
      [
        batch.map((m) => m.connection_id),
        batch.map((m) => new Date(m.minute).toISOString()),
        at.toISOString(),
      ],
    );
  }
}

export interface LateMark extends Record<string, unknown> {
  connection_id: string;
  minute: Date;
  marked_at: Date;
  /** Its bucket was rolled up again since it was marked. */
  rerolled: boolean;
}

/** The marks made up to `at` (at most `limit`, oldest minutes first). */
export async function selectLateMarks(db: Queryable, at: Date, limit = 100_000): Promise<LateMark[]> {
  const r = await db.query<LateMark>(
    `SELECT connection_id, minute, marked_at, rerolled FROM anomaly_late_minutes
      WHERE marked_at <= $1 ORDER BY minute LIMIT $2`,
    [at.toISOString(), limit],
  );
  return r.rows.map((m) => ({ ...m, minute: new Date(m.minute), marked_at: new Date(m.marked_at) }));
}

/** Records that these marks' buckets were rolled up again (unless marked again since). */
export async function markRerolled(db: Queryable, marks: readonly LateMark[]): Promise<void> {
  await eachBatch(
    db,
    marks,
    `UPDATE anomaly_late_minutes l SET rerolled = true
       FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS x(c, m, at)
      WHERE l.connection_id = x.c AND l.minute = x.m AND l.marked_at <= x.at`,
  );
}

/** Clears marks a run has covered, unless marked again since it read them. */
export async function deleteLateMarks(db: Queryable, marks: readonly LateMark[]): Promise<void> {
  await eachBatch(
    db,
    marks,
    `DELETE FROM anomaly_late_minutes l
      USING unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS x(c, m, at)
      WHERE l.connection_id = x.c AND l.minute = x.m AND l.marked_at <= x.at`,
  );
}

async function eachBatch(db: Queryable, marks: readonly LateMark[], sql: string): Promise<void> {
  for (let i = 0; i < marks.length; i += 5000) {
    const batch = marks.slice(i, i + 5000);
    await db.query(sql, [
      batch.map((m) => m.connection_id),
      batch.map((m) => m.minute.toISOString()),
      batch.map((m) => m.marked_at.toISOString()),
    ]);
  }
}
