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
