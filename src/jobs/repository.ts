import type { Queryable } from "../stores/relational/types.js";

/**
 * Takes a job's PostgreSQL advisory lock for the caller's transaction, if no other session holds
 * it; released when the transaction ends (also when its connection dies with the node).
 */
export async function tryJobLock(tx: Queryable, key: number): Promise<boolean> {
  const r = await tx.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [key]);
  return r.rows[0]?.ok ?? false;
}
