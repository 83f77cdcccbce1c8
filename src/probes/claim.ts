import type { AppContext } from "../core/context.js";
import { claimDue, type ClaimedRow, releaseExpiredLeases } from "./repository.js";
import { NAME_TTL_MS } from "./sync.js";

export type Claimed = ClaimedRow;

/**
 * Leases: a worker claims the connections due within the next tick, each its own until the lease
 * runs out. Several workers share the connection set this way and never check one connection
 * twice in a slot; a dead worker's connections return to the pool when its leases run out. A
 * check's result ends its lease (repository `recordChecks`); a lost lease discards the result.
 * The claim also reads which workflow names are still fresh (sync.ts), so a sync needs no
 * statement of its own for them.
 */
export function claim(
  ctx: AppContext,
  c: { workerId: string; max: number; leaseMs: number; aheadMs: number },
): Promise<Claimed[]> {
  const now = ctx.now().getTime();
  return claimDue(ctx.stores.db, {
    workerId: c.workerId,
    max: c.max,
    dueBy: new Date(now + c.aheadMs),
    leaseMs: c.leaseMs,
    namesSince: new Date(now - NAME_TTL_MS),
  });
}

/** Leases that ran out this long ago are cleared by housekeeping (a stopped or dead worker's). */
export const STALE_LEASE_MS = 5 * 60_000;

/**
 * Probe housekeeping (a periodic job): clears the leases of workers that stopped or died long
 * ago, so `lease_owner` names only live workers. Claiming takes over a run-out lease anyway;
 * the margin keeps a slow check's late result (still its worker's) from being discarded.
 */
export async function releaseStaleLeases(ctx: AppContext): Promise<number> {
  // the database's clock, like the leases themselves
  return releaseExpiredLeases(ctx.stores.db, STALE_LEASE_MS);
}
