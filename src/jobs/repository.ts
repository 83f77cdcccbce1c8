import type { Queryable } from "../stores/relational/types.js";

/**
 * Takes a job's PostgreSQL advisory lock for the caller's transaction, if no other session holds
 * it; released when the transaction ends (also when its connection dies with the node).
 */
export async function tryJobLock(tx: Queryable, key: number): Promise<boolean> {
  const r = await tx.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [key]);
  return r.rows[0]?.ok ?? false;
}

/**
 * Claims this period of a job for the caller's transaction: true when the job's last run started
 * at least `minGapMs` ago (or never), recording now as its start; false when another node ran it
 * within the period. Called under the job's advisory lock; rolled back with a failed run.
 */
export async function claimJobPeriod(tx: Queryable, name: string, minGapMs: number): Promise<boolean> {
  const r = await tx.query(
    `INSERT INTO job_runs (name, started_at) VALUES ($1, now())
     ON CONFLICT (name) DO UPDATE SET started_at = now()
     WHERE job_runs.started_at <= now() - make_interval(secs => $2::double precision / 1000)
     RETURNING name`,
    [name, minGapMs],
  );
  return r.rows.length > 0;
}
