import type { Queryable } from "../stores/relational/types.js";

/**
 * Workflow (n8n) and scenario (Make) names as the platform last reported them
 * (sql/postgres/010_platform_fidelity.sql). Runs keep only the id; reads add the current name.
 */

/** Stores names for one connection (a rename replaces the old one). */
export async function upsertWorkflowNames(
  db: Queryable,
  connectionId: string,
  names: { workflowId: string; name: string }[],
  at: Date,
): Promise<void> {
  if (!names.length) return;
  // One row per workflow: PostgreSQL refuses an upsert that touches a row twice ("ON CONFLICT DO
  // UPDATE command cannot affect row a second time"). The last name given wins.
  const unique = new Map(names.map((n) => [n.workflowId, n]));
  const values: string[] = [];
  const params: unknown[] = [connectionId, at];
  for (const n of unique.values()) {
    params.push(n.workflowId, n.name);
    values.push(`($1, $${params.length - 1}, $${params.length}, $2)`);
  }
  await db.query(
    `INSERT INTO workflow_names (connection_id, workflow_id, name, updated_at) VALUES ${values.join(", ")}
     ON CONFLICT (connection_id, workflow_id) DO UPDATE SET name = EXCLUDED.name, updated_at = EXCLUDED.updated_at`,
    params,
  );
}

/** Workflow ids of a connection whose name was read after `since` (no need to ask again). */
export async function freshWorkflowIds(
  db: Queryable,
  connectionId: string,
  since: Date,
): Promise<Set<string>> {
  const res = await db.query<{ workflow_id: string }>(
    "SELECT workflow_id FROM workflow_names WHERE connection_id = $1 AND updated_at > $2",
    [connectionId, since],
  );
  return new Set(res.rows.map((r) => r.workflow_id));
}

/** Names of the given (connection, workflow) pairs; key `${connection}\u0000${workflow}`. */
export async function workflowNames(
  db: Queryable,
  pairs: { connectionId: string; workflowId: string | null }[],
): Promise<Map<string, string>> {
  const wanted = pairs.filter(
    (p): p is { connectionId: string; workflowId: string } => p.workflowId !== null,
  );
  const out = new Map<string, string>();
  if (!wanted.length) return out;
  const res = await db.query<{ connection_id: string; workflow_id: string; name: string }>(
    `SELECT connection_id, workflow_id, name FROM workflow_names
      WHERE connection_id = ANY($1::text[]) AND workflow_id = ANY($2::text[])`,
    [[...new Set(wanted.map((p) => p.connectionId))], [...new Set(wanted.map((p) => p.workflowId))]],
  );
  for (const r of res.rows) out.set(nameKey(r.connection_id, r.workflow_id), r.name);
  return out;
}

export const nameKey = (connectionId: string, workflowId: string) => `${connectionId}\u0000${workflowId}`;
