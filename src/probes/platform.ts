import type { FailureReason } from "./http.js";
import type { WorkflowBState } from "./workflow-b.js";

/**
 * What the platform adapters (workflow-a.ts: n8n, workflow-b.ts: Make) have in common: the
 * result of an availability check, the runs a sync found, and the state a sync leaves for the
 * next tick. Adapters speak HTTP to the platform and return values; sync.ts stores them.
 */

/** What one availability check found; stored as one availability sample. */
export interface CheckResult {
  available: boolean;
  responseTimeMs: number | null;
  statusCode?: number;
  reason?: FailureReason;
  error?: string;
}

/** One run as the platform reported it, keyed by the platform's own id. */
export interface PlatformRun {
  id: string;
  /** When the run started; for a run Vigil stored earlier, the start it was stored at. */
  ts: Date;
  workflowId: string | null;
  /** One of the spec's five, or a platform value Vigil does not know, stored as sent. */
  status: string;
  /** Not ended yet: followed by id until it ends. */
  open: boolean;
  mode: string | null;
  stoppedAt: Date | null;
  durationMs: number | null;
  error: string | null;
  /** The failing node (n8n) or module (Make), where the platform says. */
  errorNode: string | null;
  /** The last step that ran. */
  lastNode: string | null;
  /** The platform's details were read (for a failure: its reason is as good as it gets). */
  detailed: boolean;
}

/** An unfinished run followed by id; `stored` once a row of it was written (at `ts`). */
export interface TrackedRun {
  id: string;
  ts?: string;
  stored: boolean;
  workflowId?: string | null;
}

/** The sync position of one connection, kept in `connections.sync_state` between ticks. */
export interface SyncState {
  /** workflow_a: the newest id of the last finished sweep. */
  highWater?: string;
  /** Before 2026-11 (#18): ids still open at the last pull. Read once, then kept as `tracked`. */
  open?: string[];
  /** workflow_a: a sweep that ran out of page budget, continued at the next tick. */
  sweep?: { top?: string; cursor: string; floor?: string; low?: string };
  /** Unfinished runs (and ids the list skipped) re-read by id until they end. */
  tracked?: TrackedRun[];
  /** Failed runs whose reason is still to be read (bounded per tick). */
  details?: { id: string; ts?: string }[];
  /** workflow_b: the team's scenarios and where each one's logs stand. */
  b?: WorkflowBState;
  /** A platform's 429 asked for quiet until then (ISO time): no sync before it. */
  backoffUntil?: string;
}

/**
 * Work one sync tick of one connection may do (a tick comes at most once a minute). Measured
 * against the platform, not Vigil: at 250 runs a page, 8 pages is 2,000 runs a minute.
 */
export interface SyncBudget {
  /** List pages (workflow_a) or log pages (workflow_b). */
  pages: number;
  /** Unfinished runs and skipped ids re-read by id. */
  reReads: number;
  /** Failed runs whose reason is fetched. */
  details: number;
  /** Workflow names looked up. */
  names: number;
}

export const SYNC_BUDGET: SyncBudget = { pages: 8, reReads: 50, details: 20, names: 10 };

export interface SyncOutcome {
  runs: PlatformRun[];
  names: { workflowId: string; name: string }[];
  state: SyncState;
  /** Requests sent to the platform. */
  requests: number;
  /** Set when a 429 or 5xx ended the tick early. */
  stoppedBy: string | null;
  retryAfterMs?: number;
}

/** A platform's id (string or number) as text, bounded; null when absent. */
export const asId = (v: unknown): string | null =>
  typeof v === "string" && v
    ? v.slice(0, 64)
    : typeof v === "number" && Number.isFinite(v)
      ? String(v)
      : null;

/** A platform's text field, bounded; null when absent or empty. */
export const text = (v: unknown, max = 2000): string | null =>
  typeof v === "string" && v ? v.slice(0, max) : null;
