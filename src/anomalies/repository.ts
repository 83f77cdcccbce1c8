import type { Actor } from "../core/actor.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";

/** An anomalies row as stored (numerics may come back as strings from the driver). */
export interface AnomalyRecord extends Record<string, unknown> {
  id: string;
  connection_id: string;
  metric: string;
  status: string;
  detected_at: Date;
  resolved_at: Date | null;
  window_start: Date;
  window_end: Date;
  observed: number | string;
  baseline_mean: number | string;
  baseline_stddev: number | string;
  z_score: number | string;
}

/**
 * One page of anomalies of the connections the actor may see, newest detection first (ties by
 * id, descending), `since` inclusive and `until` exclusive on `detected_at`, after `after`
 * (a detection time and id).
 */
export async function anomalyPage(
  db: Queryable,
  actor: Actor,
  q: PageRequest & Window & { connectionId?: string; status?: string },
): Promise<Page<AnomalyRecord>> {
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  const conds = [visibleConnectionsCondition(actor, param)];
  if (q.connectionId) conds.push(`x.connection_id = ${param(q.connectionId)}`);
  if (q.status !== undefined) conds.push(`x.status = ${param(q.status)}`);
  if (q.since) conds.push(`x.detected_at >= ${param(q.since.toISOString())}`);
  if (q.until) conds.push(`x.detected_at < ${param(q.until.toISOString())}`);
  if (q.after)
    conds.push(
      `(x.detected_at, x.id) < (${param(q.after.ts.toISOString())}::timestamptz, ${param(q.after.key[0] ?? "")})`,
    );
  const r = await db.query<AnomalyRecord>(
    `SELECT x.* FROM anomalies x JOIN connections c ON c.id = x.connection_id
      WHERE ${conds.join(" AND ")}
      ORDER BY x.detected_at DESC, x.id DESC LIMIT ${param(q.limit + 1)}`,
    params,
  );
  const more = r.rows.length > q.limit;
  const rows = more ? r.rows.slice(0, q.limit) : r.rows;
  const last = rows[rows.length - 1];
  return { rows, next: more && last ? { ts: new Date(last.detected_at), key: [last.id] } : null };
}
