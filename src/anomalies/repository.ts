import { randomUUID } from "node:crypto";
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
  baseline_median: number | string | null;
  baseline_mad: number | string | null;
  band_low: number | string | null;
  band_high: number | string | null;
  started_at: Date | null;
  ended_at: Date | null;
  incident_id: string | null;
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

// --- the detector's statements (src/anomalies/detect.ts) ---

/** A connection the detector judges, with what its incident e-mails name. */
export interface DetectorConnection extends Record<string, unknown> {
  id: string;
  service_name: string;
  user_id: string;
  organization_id: string | null;
}

export async function selectDetectorConnections(db: Queryable): Promise<DetectorConnection[]> {
  const r = await db.query<DetectorConnection>(
    "SELECT id, service_name, user_id, organization_id FROM connections ORDER BY id",
  );
  return r.rows;
}

/** The detector's memory of one connection and metric (anomaly_detector_state). */
export interface DetectorState extends Record<string, unknown> {
  connection_id: string;
  metric: string;
  last_window: Date;
  over_streak: number;
  under_streak: number;
  streak_started_at: Date | null;
  anomaly_id: string | null;
}

/** The states that remember something: a streak under way or an open anomaly. */
export async function selectDetectorStates(db: Queryable): Promise<DetectorState[]> {
  const r = await db.query<DetectorState>(
    `SELECT connection_id, metric, last_window, over_streak, under_streak, streak_started_at, anomaly_id
       FROM anomaly_detector_state
      WHERE over_streak > 0 OR under_streak > 0 OR anomaly_id IS NOT NULL`,
  );
  return r.rows.map((s) => ({
    ...s,
    last_window: new Date(s.last_window),
    over_streak: Number(s.over_streak),
    under_streak: Number(s.under_streak),
    streak_started_at: s.streak_started_at ? new Date(s.streak_started_at) : null,
  }));
}

export async function upsertDetectorState(db: Queryable, s: DetectorState): Promise<void> {
  await db.query(
    `INSERT INTO anomaly_detector_state
       (connection_id, metric, last_window, over_streak, under_streak, streak_started_at, anomaly_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (connection_id, metric) DO UPDATE SET
       last_window = EXCLUDED.last_window, over_streak = EXCLUDED.over_streak,
       under_streak = EXCLUDED.under_streak, streak_started_at = EXCLUDED.streak_started_at,
       anomaly_id = EXCLUDED.anomaly_id`,
    [
      s.connection_id,
      s.metric,
      s.last_window.toISOString(),
      s.over_streak,
      s.under_streak,
      s.streak_started_at?.toISOString() ?? null,
      s.anomaly_id,
    ],
  );
}

/** Many connections' states in one statement (the detector's runs where nothing opens or resolves). */
export async function upsertDetectorStates(db: Queryable, states: readonly DetectorState[]): Promise<void> {
  for (let i = 0; i < states.length; i += 1000) {
    const batch = states.slice(i, i + 1000);
    await db.query(
      `INSERT INTO anomaly_detector_state
         (connection_id, metric, last_window, over_streak, under_streak, streak_started_at, anomaly_id)
       SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::int[],
                            $6::timestamptz[], $7::text[])
       ON CONFLICT (connection_id, metric) DO UPDATE SET
         last_window = EXCLUDED.last_window, over_streak = EXCLUDED.over_streak,
         under_streak = EXCLUDED.under_streak, streak_started_at = EXCLUDED.streak_started_at,
         anomaly_id = EXCLUDED.anomaly_id`,
      [
        batch.map((s) => s.connection_id),
        batch.map((s) => s.metric),
        batch.map((s) => s.last_window.toISOString()),
        batch.map((s) => s.over_streak),
        batch.map((s) => s.under_streak),
        batch.map((s) => s.streak_started_at?.toISOString() ?? null),
        batch.map((s) => s.anomaly_id),
      ],
    );
  }
}

/** How far the detector has judged and rolled its buckets up (null: not yet). */
export async function selectDetectorProgress(
  db: Queryable,
): Promise<{ judgedThrough: Date | null; rolledThrough: Date | null }> {
  const r = await db.query<{ judged_through: Date | null; rolled_through: Date | null }>(
    "SELECT judged_through, rolled_through FROM anomaly_detector_progress WHERE id = 1",
  );
  const row = r.rows[0];
  return {
    judgedThrough: row?.judged_through ? new Date(row.judged_through) : null,
    rolledThrough: row?.rolled_through ? new Date(row.rolled_through) : null,
  };
}

export async function saveDetectorProgress(
  db: Queryable,
  p: { judgedThrough: Date | null; rolledThrough: Date | null },
): Promise<void> {
  await db.query(
    `INSERT INTO anomaly_detector_progress (id, judged_through, rolled_through) VALUES (1, $1, $2)
     ON CONFLICT (id) DO UPDATE SET judged_through = EXCLUDED.judged_through, rolled_through = EXCLUDED.rolled_through`,
    [p.judgedThrough?.toISOString() ?? null, p.rolledThrough?.toISOString() ?? null],
  );
}

/** An anomaly of the connection and metric that already covers part of [from, to), if any (an open one first). */
export async function overlappingAnomaly(
  db: Queryable,
  connectionId: string,
  metric: string,
  from: Date,
  to: Date,
): Promise<{ id: string; status: string } | null> {
  const r = await db.query<{ id: string; status: string }>(
    `SELECT id, status FROM anomalies WHERE connection_id = $1 AND metric = $2
        AND started_at < $4 AND (ended_at IS NULL OR ended_at > $3)
      ORDER BY status = 'open' DESC LIMIT 1`,
    [connectionId, metric, from.toISOString(), to.toISOString()],
  );
  return r.rows[0] ?? null;
}

/** A new anomaly, as the detector records it: open, or (found for the past) already resolved. */
export interface NewAnomaly {
  /** A new id when not given. */
  id?: string;
  /** Set for an anomaly that began and ended before the run that found it. */
  endedAt?: Date;
  connectionId: string;
  metric: string;
  detectedAt: Date;
  startedAt: Date;
  windowStart: Date;
  windowEnd: Date;
  observed: number;
  baselineMean: number;
  baselineStddev: number;
  baselineMedian: number;
  baselineMad: number;
  bandLow: number;
  bandHigh: number;
  score: number;
}

export async function insertAnomaly(db: Queryable, a: NewAnomaly): Promise<string> {
  const id = a.id ?? randomUUID();
  await db.query(
    `INSERT INTO anomalies (id, connection_id, metric, status, detected_at, window_start, window_end,
       observed, baseline_mean, baseline_stddev, z_score, baseline_median, baseline_mad, band_low,
       band_high, started_at, ended_at, resolved_at)
     VALUES ($1, $2, $3, $16, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $17, $18)`,
    [
      id,
      a.connectionId,
      a.metric,
      a.detectedAt.toISOString(),
      a.windowStart.toISOString(),
      a.windowEnd.toISOString(),
      a.observed,
      a.baselineMean,
      a.baselineStddev,
      a.score,
      a.baselineMedian,
      a.baselineMad,
      a.bandLow,
      a.bandHigh,
      a.startedAt.toISOString(),
      a.endedAt ? "resolved" : "open",
      a.endedAt?.toISOString() ?? null,
      a.endedAt ? a.detectedAt.toISOString() : null,
    ],
  );
  return id;
}

/** Resolves an open anomaly: `endedAt` is the end of its last window outside the band. */
export async function resolveAnomaly(db: Queryable, id: string, at: Date, endedAt: Date): Promise<void> {
  await db.query(
    "UPDATE anomalies SET status = 'resolved', resolved_at = $2, ended_at = $3 WHERE id = $1 AND status = 'open'",
    [id, at.toISOString(), endedAt.toISOString()],
  );
}

export async function setAnomalyIncident(db: Queryable, id: string, incidentId: string): Promise<void> {
  await db.query("UPDATE anomalies SET incident_id = $2 WHERE id = $1", [id, incidentId]);
}

export async function countOpenAnomalies(db: Queryable, connectionId: string): Promise<number> {
  const r = await db.query<{ n: number | string }>(
    "SELECT count(*) AS n FROM anomalies WHERE connection_id = $1 AND status = 'open'",
    [connectionId],
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** The connection's unresolved `anomaly` incident, which a newly opened anomaly joins. */
export async function unresolvedAnomalyIncident(db: Queryable, connectionId: string): Promise<string | null> {
  const r = await db.query<{ id: string }>(
    "SELECT id FROM incidents WHERE connection_id = $1 AND kind = 'anomaly' AND status <> 'resolved'",
    [connectionId],
  );
  return r.rows[0]?.id ?? null;
}

// --- late rows (src/anomalies/late.ts) ---

export async function insertLateMarks(
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
