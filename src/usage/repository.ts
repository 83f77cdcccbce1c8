import type { Queryable } from "../stores/relational/types.js";

/**
 * The statements on `usage_idempotency` (sql/postgres/017_usage_idempotency.sql): the
 * Idempotency-Key claims of POST /v1/usage.
 */

export interface IdempotencyClaim {
  /** The body's SHA-256 the key was first used with. */
  body_sha256: string;
  /** The batch's timestamp, fixed by the first request with the key. */
  recorded_at: Date;
}

/**
 * Claims (scope, key) for a batch, or finds the claim of an earlier request with the same key:
 * answers the claim as it stands (the earlier one's body hash and timestamp when there was one).
 */
export async function claimIdempotencyKey(
  db: Queryable,
  c: { scope: string; keySha256: string; bodySha256: string; entries: number; at: Date },
): Promise<IdempotencyClaim> {
  // DO UPDATE (a no-op write) rather than DO NOTHING, so RETURNING gives the existing row
  const r = await db.query<{ body_sha256: string; recorded_at: Date | string }>(
    `INSERT INTO usage_idempotency (api_key_id, key_sha256, body_sha256, entries, recorded_at)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (api_key_id, key_sha256) DO UPDATE SET api_key_id = EXCLUDED.api_key_id
     RETURNING body_sha256, recorded_at`,
    [c.scope, c.keySha256, c.bodySha256, c.entries, c.at.toISOString()],
  );
  const row = r.rows[0] as { body_sha256: string; recorded_at: Date | string };
  return { body_sha256: row.body_sha256, recorded_at: new Date(row.recorded_at) };
}

/** Removes claims recorded before `before` (the retention job, hourly). */
export async function expireIdempotencyKeys(db: Queryable, before: Date): Promise<number> {
  const r = await db.query("DELETE FROM usage_idempotency WHERE recorded_at < $1", [before.toISOString()]);
  return r.rowCount;
}

// --- account spend (account-spend.ts): the connections a spend report covers ---

/** A connection a spend report may cover: its name and account, for the filters and the report. */
export interface SpendConnectionRow extends Record<string, unknown> {
  id: string;
  service_name: string;
  service_type: string;
  organization_id: string | null;
  organization_name: string | null;
}

/**
 * The connections visible under `visible` (identity's one visibility condition, built on
 * `connections c`), narrowed to `personal` ones or one organization's, by name.
 */
export async function spendConnections(
  db: Queryable,
  visible: (param: (v: unknown) => string) => string,
  f: { organizationId?: string | null },
): Promise<SpendConnectionRow[]> {
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  const conds = [visible(param)];
  if (f.organizationId === "personal") conds.push("c.organization_id IS NULL");
  else if (f.organizationId) conds.push(`c.organization_id = ${param(f.organizationId)}`);
  const r = await db.query<SpendConnectionRow>(
    `SELECT c.id, c.service_name, c.service_type, c.organization_id, o.name AS organization_name
       FROM connections c LEFT JOIN organizations o ON o.id = c.organization_id
      WHERE ${conds.join(" AND ")}
      ORDER BY lower(c.service_name), c.id`,
    params,
  );
  return r.rows;
}
