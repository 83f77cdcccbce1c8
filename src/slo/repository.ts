import type { Queryable } from "../stores/relational/types.js";

export type SloRow = {
  connection_id: string;
  objective: number;
  window_days: number;
  created_at: Date;
  updated_at: Date;
};

export async function selectSlo(db: Queryable, connectionId: string): Promise<SloRow | null> {
  const { rows } = await db.query<SloRow>(
    "SELECT connection_id, objective, window_days, created_at, updated_at FROM connection_slos WHERE connection_id = $1",
    [connectionId],
  );
  return rows[0] ?? null;
}

export async function upsertSlo(
  db: Queryable,
  s: { connectionId: string; objective: number; windowDays: number; at: Date },
): Promise<SloRow> {
  const { rows } = await db.query<SloRow>(
    `INSERT INTO connection_slos (connection_id, objective, window_days, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $4)
     ON CONFLICT (connection_id) DO UPDATE SET objective = EXCLUDED.objective,
       window_days = EXCLUDED.window_days, updated_at = EXCLUDED.updated_at
     RETURNING connection_id, objective, window_days, created_at, updated_at`,
    [s.connectionId, s.objective, s.windowDays, s.at.toISOString()],
  );
  return rows[0] as SloRow;
}

export async function deleteSlo(db: Queryable, connectionId: string): Promise<boolean> {
  const { rowCount } = await db.query("DELETE FROM connection_slos WHERE connection_id = $1", [connectionId]);
  return rowCount > 0;
}

// --- burn-rate alerts (burn.ts, job.ts) ---

/** An SLO as the burn-rate job evaluates it, with its connection's facts for the alerts. */
export interface SloBurnRow extends Record<string, unknown> {
  connection_id: string;
  objective: number;
  window_days: number;
  burn_severity: "page" | "ticket" | null;
  service_name: string;
  user_id: string;
  organization_id: string | null;
}

/** Up to `limit` SLOs, least recently evaluated first (never evaluated first of all). */
export async function selectSlosForBurn(db: Queryable, limit: number): Promise<SloBurnRow[]> {
  const { rows } = await db.query<SloBurnRow>(
    `SELECT s.connection_id, s.objective, s.window_days, s.burn_severity,
            c.service_name, c.user_id, c.organization_id
       FROM connection_slos s JOIN connections c ON c.id = s.connection_id
      ORDER BY s.burn_evaluated_at NULLS FIRST, s.connection_id
      LIMIT $1`,
    [limit],
  );
  return rows;
}

/** The SLO's objective, window and last severity, its row locked; null once the SLO is gone. */
export async function lockSloBurn(
  tx: Queryable,
  connectionId: string,
): Promise<Pick<SloBurnRow, "objective" | "window_days" | "burn_severity"> | null> {
  const { rows } = await tx.query<Pick<SloBurnRow, "objective" | "window_days" | "burn_severity">>(
    "SELECT objective, window_days, burn_severity FROM connection_slos WHERE connection_id = $1 FOR UPDATE",
    [connectionId],
  );
  return rows[0] ?? null;
}

/** Records the severity an evaluation found (null: no alert condition held). */
export async function recordBurn(
  tx: Queryable,
  connectionId: string,
  severity: "page" | "ticket" | null,
  at: Date,
): Promise<void> {
  await tx.query(
    "UPDATE connection_slos SET burn_severity = $2, burn_evaluated_at = $3 WHERE connection_id = $1",
    [connectionId, severity, at.toISOString()],
  );
}

/** Records when SLOs whose severity did not change were evaluated (one statement). */
export async function recordEvaluated(
  db: Queryable,
  connectionIds: readonly string[],
  at: Date,
): Promise<void> {
  await db.query("UPDATE connection_slos SET burn_evaluated_at = $2 WHERE connection_id = ANY($1::text[])", [
    [...connectionIds],
    at.toISOString(),
  ]);
}

/**
 * Unresolved `slo_burn` incidents no SLO holds: the connection has no SLO any more, or has one
 * whose last evaluation found no condition (removed and set again before the job ran).
 */
export async function selectOrphanBurnIncidents(
  db: Queryable,
  limit: number,
): Promise<Pick<SloBurnRow, "connection_id" | "service_name" | "user_id" | "organization_id">[]> {
  const { rows } = await db.query<
    Pick<SloBurnRow, "connection_id" | "service_name" | "user_id" | "organization_id">
  >(
    `SELECT c.id AS connection_id, c.service_name, c.user_id, c.organization_id
       FROM incidents i JOIN connections c ON c.id = i.connection_id
      WHERE i.kind = 'slo_burn' AND i.status <> 'resolved'
        AND NOT EXISTS (SELECT 1 FROM connection_slos s
                         WHERE s.connection_id = i.connection_id AND s.burn_severity IS NOT NULL)
      LIMIT $1`,
    [limit],
  );
  return rows;
}
