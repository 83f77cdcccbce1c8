import { type ConnectionStatus, nextStatus, type StatusEvent } from "../connections/status.js";
import { RECOVERY_SUCCESSES } from "./schedule.js";

/** What one check result means, with the connection's counters after it. */
export interface CheckFacts {
  available: boolean;
  /** The platform rejected the credential (401/403): an error at once, not after a run. */
  badCredentials: boolean;
  /** Consecutive failed / successful checks, this one included. */
  failures: number;
  successes: number;
  /** Failures that make a run (the connection's own, or the default). */
  threshold: number;
  /** Whether an availability incident is unresolved. */
  incidentOpen: boolean;
  status: ConnectionStatus;
}

export interface Decision {
  /** The status event of this check, for connections/status.ts. */
  event: StatusEvent;
  /** The status after it (nextStatus). */
  status: ConnectionStatus;
  /** Open an availability incident: a run of failures reached the threshold and none is open. */
  open: boolean;
  /** Resolve the open availability incident: enough consecutive successes. */
  resolve: boolean;
}

/**
 * The probe's decision after one check, as a pure function of the facts. Both decisions are
 * re-evaluated at every check (a run stays a run), so nothing is lost if a process dies between
 * recording the counters and acting on the decision.
 */
export function decide(f: CheckFacts): Decision {
  const event: StatusEvent = f.available
    ? { type: "check_succeeded" }
    : {
        type: "check_failed",
        badCredentials: f.badCredentials,
        failures: f.failures,
        threshold: f.threshold,
      };
  return {
    event,
    status: nextStatus(f.status, event),
    open: !f.available && f.failures >= f.threshold && !f.incidentOpen,
    resolve: f.available && f.successes >= RECOVERY_SUCCESSES && f.incidentOpen,
  };
}

/** Whether the decision changes anything beyond the counters (a transaction is needed). */
export const changesAnything = (d: Decision, current: ConnectionStatus) =>
  d.status !== current || d.open || d.resolve;
