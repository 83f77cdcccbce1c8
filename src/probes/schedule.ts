import { createHash } from "node:crypto";
import { CHECK_INTERVAL_SECONDS, type Plan } from "../identity/plans.js";

/** Consecutive failed checks that make a run (open an incident), unless the connection sets its own. */
export const DEFAULT_FAILURE_THRESHOLD = 3;
/** Consecutive successful checks that resolve an availability incident. */
export const RECOVERY_SUCCESSES = 2;

export function intervalSeconds(plan: Plan, override: number | null): number {
  const p = CHECK_INTERVAL_SECONDS[plan];
  return override ? Math.max(override, p.minimum) : p.default;
}

/**
 * The next check time after `after`: each connection has a fixed phase within its interval
 * (from a hash of its id), so many connections spread evenly over the interval instead of
 * firing together, and a connection keeps its slot from one check to the next. A slot less than
 * half an interval away is skipped, so a check made off-phase (a new or edited connection is
 * checked at once) is not followed by another moments later.
 */
export function nextSlot(connectionId: string, intervalSec: number, after: Date): Date {
  const interval = intervalSec * 1000;
  const phase = createHash("sha256").update(connectionId).digest().readUInt32BE(0) % interval;
  const t = after.getTime();
  const base = Math.floor((t - phase) / interval) * interval + phase;
  return new Date(base + interval - t >= interval / 2 ? base + interval : base + 2 * interval);
}
