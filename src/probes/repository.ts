import type { Plan } from "../identity/plans.js";
import type { Queryable } from "../stores/relational/types.js";
import type { SyncState } from "./sync.js";

/**
 * The probe scheduler's columns of `connections`: leases, slots, counters and sync state
 * (sql/postgres/004_probes.sql, 006_sync.sql), and the gateways the heartbeat monitor watches.
 * `connections.status` is not written here: connections/status.ts is its one writer.
 */

/** A connection claimed for a check. */
export interface ClaimedRow extends Record<string, unknown> {
  id: string;
  user_id: string;
  organization_id: string | null;
  service_type: "workflow_a" | "workflow_b";
  service_name: string;
  status: string;
  base_url: string | null;
  api_key_enc: string | null;
  api_token_enc: string | null;
  region: string | null;
  team_id: string | null;
  sync_state: SyncState;
  last_sync_at: Date | null;
  next_check_at: Date;
  check_interval_seconds: number | null;
  /** Failed checks in a row before this one (0: the last check succeeded, or none ran yet). */
  consecutive_failures: number;
  plan: Plan;
  /**
   * workflow_a: the workflow ids whose names were read after `namesSince` (the sync need not ask
   * for them again), read with the claim so a sync costs no statement of its own; null otherwise.
   */
  fresh_workflow_ids: string[] | null;
}

/**
 * Leases up to `max` connections due before `dueBy` to `workerId` until `leaseUntil`, skipping
 * rows another worker is claiming (FOR UPDATE SKIP LOCKED) and rows under a live lease; a lease
 * that ran out (its worker died) is taken over.
 */
export async function claimDue(
  db: Queryable,
  c: { workerId: string; max: number; dueBy: Date; leaseMs: number; namesSince: Date },
): Promise<ClaimedRow[]> {
  // Leases coordinate processes, so they run on the database's clock (one clock for every
  // worker, whatever their hosts' clocks say); when a connection is due is business time.
  const r = await db.query<ClaimedRow>(
    `WITH due AS (
       SELECT id FROM connections
        WHERE service_type <> 'gateway' AND next_check_at <= $4
          AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_check_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     )
     UPDATE connections c
        SET lease_owner = $1, lease_until = now() + make_interval(secs => $3)
       FROM due
      WHERE c.id = due.id
     RETURNING c.id, c.user_id, c.organization_id, c.service_type, c.service_name, c.status, c.base_url,
               c.api_key_enc, c.api_token_enc, c.region, c.team_id, c.sync_state, c.last_sync_at,
               c.next_check_at, c.check_interval_seconds, c.consecutive_failures,
               (SELECT coalesce(o.plan, u.plan) FROM users u LEFT JOIN organizations o ON o.id = c.organization_id
                 WHERE u.id = c.user_id) AS plan,
               CASE WHEN c.service_type = 'workflow_a' THEN
                 ARRAY(SELECT n.workflow_id FROM workflow_names n
                        WHERE n.connection_id = c.id AND n.updated_at > $5::timestamptz) END AS fresh_workflow_ids`,
    [c.workerId, c.max, c.leaseMs / 1000, c.dueBy.toISOString(), c.namesSince.toISOString()],
    { prepare: "vigil_probe_claim" },
  );
  return r.rows;
}

/** The connection's state after a check's counters were applied. */
export interface CheckedRow extends Record<string, unknown> {
  failures: number;
  successes: number;
  status: string;
  threshold: number | null;
  /** Whether an availability incident is unresolved (read in the same statement: one round trip per check). */
  open: boolean;
}

/** One check's result for `recordChecks`. */
export interface CheckRecord {
  id: string;
  available: boolean;
  at: Date;
  nextCheckAt: Date;
  sync: SyncState | null;
}

/**
 * Applies checks to the counters, the slots and the sync state, and ends their leases, in one
 * statement for the whole batch (the common case needs no more). Only the lease holder's write
 * counts: an entry is null when its connection was deleted meanwhile or the lease was lost to
 * another worker. Answers in the order of `checks`; one connection appears at most once.
 */
export async function recordChecks(
  db: Queryable,
  workerId: string,
  checks: readonly CheckRecord[],
): Promise<(CheckedRow | null)[]> {
  if (checks.length === 0) return [];
  // Rows are locked in id order (the sort, then FOR UPDATE), so two such statements, or one and
  // any other that locks connections in id order, cannot deadlock.
  const sorted = [...checks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const r = await db.query<CheckedRow & { id: string }>(
    `WITH v AS (
       SELECT * FROM unnest($2::text[], $3::boolean[], $4::timestamptz[], $5::timestamptz[], $6::jsonb[])
                  AS x(id, available, at, next_at, sync)
     ), mine AS (
       SELECT c.id FROM connections c WHERE c.id = ANY($2::text[]) AND c.lease_owner = $1
        ORDER BY c.id FOR UPDATE
     )
     UPDATE connections SET
       consecutive_failures = CASE WHEN v.available THEN 0 ELSE consecutive_failures + 1 END,
       consecutive_successes = CASE WHEN v.available THEN consecutive_successes + 1 ELSE 0 END,
       last_check_at = v.at, next_check_at = v.next_at, lease_owner = NULL, lease_until = NULL,
       sync_state = coalesce(v.sync, sync_state),
       last_sync_at = CASE WHEN v.sync IS NULL THEN last_sync_at ELSE v.at END
       FROM v, mine
     WHERE connections.id = v.id AND connections.id = mine.id AND connections.lease_owner = $1
     RETURNING connections.id, consecutive_failures AS failures, consecutive_successes AS successes, status,
               failure_threshold AS threshold,
               EXISTS (SELECT 1 FROM incidents i WHERE i.connection_id = connections.id
                        AND i.kind = 'availability' AND i.status <> 'resolved') AS open`,
    [
      workerId,
      sorted.map((c) => c.id),
      sorted.map((c) => c.available),
      sorted.map((c) => c.at.toISOString()),
      sorted.map((c) => c.nextCheckAt.toISOString()),
      sorted.map((c) => (c.sync ? JSON.stringify(c.sync) : null)),
    ],
    { prepare: "vigil_probe_record" },
  );
  const byId = new Map(r.rows.map((row) => [row.id, row]));
  return checks.map((c) => {
    const row = byId.get(c.id);
    if (!row) return null;
    const { id: _id, ...rest } = row;
    return rest;
  });
}

/**
 * Extends the leases `workerId` still holds on these connections to `leaseMs` from now (the
 * database's clock), so a check that outlasts its lease (queued for a slot, slow platform
 * requests, a sync) is not claimed by another worker meanwhile. A lease another worker has taken,
 * or that a recorded result ended, is left alone.
 */
export async function renewLeases(
  db: Queryable,
  workerId: string,
  ids: readonly string[],
  leaseMs: number,
): Promise<number> {
  const r = await db.query(
    `UPDATE connections SET lease_until = now() + make_interval(secs => $3)
      WHERE id = ANY($2::text[]) AND lease_owner = $1`,
    [workerId, ids, leaseMs / 1000],
  );
  return r.rowCount;
}

/** Gives back the leases `workerId` holds on these connections (claimed, then not checked: a stop). */
export async function releaseLeases(
  db: Queryable,
  workerId: string,
  ids: readonly string[],
): Promise<number> {
  const r = await db.query(
    "UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE id = ANY($1::text[]) AND lease_owner = $2",
    [ids, workerId],
  );
  return r.rowCount;
}

/** Ends the leases that ran out over `agoMs` ago by the database's clock (their workers died or stopped mid-check). */
export async function releaseExpiredLeases(db: Queryable, agoMs: number): Promise<number> {
  const r = await db.query(
    "UPDATE connections SET lease_owner = NULL, lease_until = NULL WHERE lease_until < now() - make_interval(secs => $1)",
    [agoMs / 1000],
  );
  return r.rowCount;
}

/** A gateway connection as the heartbeat monitor sees it. */
export interface GatewayRow extends Record<string, unknown> {
  id: string;
  user_id: string;
  organization_id: string | null;
  service_name: string;
  status: string;
  last_heartbeat_at: Date;
  interval: number;
  grace: number;
  open_incident: string | null;
  opened_at: Date | null;
}

/** Every gateway that has sent a heartbeat, its interval and grace, and its unresolved missed_heartbeat incident. */
export async function selectGateways(
  db: Queryable,
  defaults: { intervalSeconds: number; graceSeconds: number },
): Promise<GatewayRow[]> {
  const r = await db.query<GatewayRow>(
    `SELECT c.id, c.user_id, c.organization_id, c.service_name, c.status, c.last_heartbeat_at,
            coalesce(c.heartbeat_interval_seconds, $1) AS interval,
            coalesce(c.heartbeat_grace_seconds, $2) AS grace,
            i.id AS open_incident, i.opened_at
       FROM connections c
       LEFT JOIN incidents i ON i.connection_id = c.id AND i.kind = 'missed_heartbeat' AND i.status <> 'resolved'
      WHERE c.service_type = 'gateway' AND c.last_heartbeat_at IS NOT NULL`,
    [defaults.intervalSeconds, defaults.graceSeconds],
  );
  return r.rows;
}
