import type { AppContext } from "../core/context.js";
import { insertLateMarks } from "./repository.js";

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
