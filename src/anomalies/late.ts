import { type AppContext, perApp } from "../core/context.js";
import type { Queryable } from "../stores/relational/types.js";

/**
 * Late rows for the anomaly detector. The detector rolls up and judges only minutes that ended
 * at least {@link SETTLE_MS} before its run; a row committed later than that after its own time
 * (a heartbeat buffered while its daemon was cut off, an execution synced when it finished, a
 * slow check, gap-fill) is marked here, per connection and minute, once it is committed. The next
 * run rolls its 5-minute bucket up again and, when the minute has left every window it judges,
 * judges that connection's past minutes again (src/anomalies/detect.ts), so late data neither
 * goes unjudged nor opens an anomaly twice.
 */
export const SETTLE_MS = 30_000;
const MINUTE_MS = 60_000;
const MARK_EVERY_MS = 1_000;

const recentMarks = perApp(() => new Map<string, number>());

/**
 * Marks the minutes of committed rows that came late. Nearly every call (live heartbeats and
 * checks) has nothing late: no statement and no promise. The same minute of a connection is
 * marked at most once a second per process (a flood of buffered heartbeats).
 */
export function markLate(
  ctx: AppContext,
  rows: readonly { ts: Date; connection_id: string }[],
): Promise<void> | null {
  const now = ctx.now().getTime();
  const late = now - SETTLE_MS;
  let marks: Map<string, { connection_id: string; minute: number }> | null = null;
  const recent = recentMarks(ctx);
  for (const r of rows) {
    const t = r.ts.getTime();
    if (t >= late) continue;
    const minute = Math.floor(t / MINUTE_MS) * MINUTE_MS;
    const key = `${r.connection_id}/${minute}`;
    if (now - (recent.get(key) ?? -Infinity) < MARK_EVERY_MS) continue;
    marks ??= new Map();
    marks.set(key, { connection_id: r.connection_id, minute });
  }
  if (!marks) return null;
  for (const key of marks.keys()) recent.set(key, now);
  if (recent.size > 10_000) for (const [k, at] of recent) if (now - at >= MARK_EVERY_MS) recent.delete(k);
  return insertLateMarks(ctx.stores.db, [...marks.values()], new Date(now));
}

async function insertLateMarks(
  db: Queryable,
  marks: { connection_id: string; minute: number }[],
  at: Date,
): Promise<void> {
  for (let i = 0; i < marks.length; i += 5000) {
    const batch = marks.slice(i, i + 5000);
    await db.query(
      `INSERT INTO anomaly_late_minutes (connection_id, minute, marked_at)
       SELECT c, m, $3::timestamptz FROM unnest($1::text[], $2::timestamptz[]) AS x(c, m)
       ON CONFLICT (connection_id, minute) DO UPDATE SET marked_at = EXCLUDED.marked_at`,
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
}

/** The marks made up to `at` (at most `limit`, oldest minutes first). */
export async function selectLateMarks(db: Queryable, at: Date, limit = 100_000): Promise<LateMark[]> {
  const r = await db.query<LateMark>(
    `SELECT connection_id, minute, marked_at FROM anomaly_late_minutes
      WHERE marked_at <= $1 ORDER BY minute LIMIT $2`,
    [at.toISOString(), limit],
  );
  return r.rows.map((m) => ({ ...m, minute: new Date(m.minute), marked_at: new Date(m.marked_at) }));
}

/** Clears marks a run has covered, unless marked again since it read them. */
export async function deleteLateMarks(db: Queryable, marks: readonly LateMark[]): Promise<void> {
  for (let i = 0; i < marks.length; i += 5000) {
    const batch = marks.slice(i, i + 5000);
    await db.query(
      `DELETE FROM anomaly_late_minutes l
        USING unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS x(c, m, at)
        WHERE l.connection_id = x.c AND l.minute = x.m AND l.marked_at <= x.at`,
      [
        batch.map((m) => m.connection_id),
        batch.map((m) => m.minute.toISOString()),
        batch.map((m) => m.marked_at.toISOString()),
      ],
    );
  }
}
