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

/**
 * A run followed by id: unfinished, or listed without a usable start (an n8n run still queued).
 * `stored` once a row of it was written (at `ts`); `readTick` is the tick (SyncState `ticks`) in
 * which the platform last told Vigil about it, so the least recently read go first when the
 * re-read budget is short.
 */
export interface TrackedRun {
  id: string;
  ts?: string;
  stored: boolean;
  workflowId?: string | null;
  readTick?: number;
}

/** The sync position of one connection, kept in `connections.sync_state` between ticks. */
export interface SyncState {
  /** workflow_a: the newest id of the last finished sweep. */
  highWater?: string;
  /** workflow_a: sync ticks so far (the clock of `TrackedRun.readTick`). */
  ticks?: number;
  /** Before 2026-11 (#18): ids still open at the last pull. Read once, then kept as `tracked`. */
  open?: string[];
  /** workflow_a: a sweep that ran out of page budget, continued at the next tick. */
  sweep?: { top?: string; cursor: string; floor?: string; low?: string };
  /** Unfinished runs (and ids the list skipped) re-read by id until they end. */
  tracked?: TrackedRun[];
  /** workflow_a: ids missing from the list (inclusive ranges), still to be looked up by id. */
  gaps?: { hi: string; lo: string }[];
  /**
   * workflow_a: runs that tracking closed at a start the platform no longer shows (a resumed
   * run), which a sweep may still list: the sweep writes them at the start they were stored at.
   */
  resumed?: { id: string; ts: string }[];
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
  /** List pages (workflow_a) or requests in all (workflow_b). */
  pages: number;
  /** Unfinished runs and skipped ids re-read by id. */
  reReads: number;
  /** Failed runs whose reason is fetched. */
  details: number;
  /** Workflow names looked up. */
  names: number;
}

export const SYNC_BUDGET: SyncBudget = { pages: 8, reReads: 50, details: 20, names: 10 };

/** The clock of one tick: business time (`now`), and when its requests must stop (`deadline`, epoch ms of `Date.now()`). */
export interface TickLimits {
  now: Date;
  deadline: number;
}

export interface SyncOutcome {
  runs: PlatformRun[];
  names: { workflowId: string; name: string }[];
  state: SyncState;
  /** Requests sent to the platform. */
  requests: number;
  /**
   * Why the tick ended early: `HTTP 429` or a 5xx (the platform asked for quiet), `deadline`
   * (the tick's time ran out), or a network failure that makes every further request futile.
   */
  stoppedBy: string | null;
  retryAfterMs?: number;
  /** What the operator should know: state dropped at its bounds, scenarios set aside. */
  warnings: string[];
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

/** A JSON object (not null, not an array): what every answer and list item must be before it is read. */
export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** `obj[key]` when `obj` is an object; a JSON `null` answer or a stray number reads as nothing. */
export const field = (obj: unknown, key: string): unknown => (isRecord(obj) ? obj[key] : undefined);

/** A platform clock may run a little ahead of Vigil's; a start later than this is not a start. */
export const CLOCK_SKEW_MS = 24 * 3_600_000;

/** A start the timeline can hold: after 1970 and not later than a day past `now`. */
export const plausibleStart = (d: Date | null, now: Date): d is Date =>
  d !== null &&
  Number.isFinite(d.getTime()) &&
  d.getTime() >= 0 &&
  d.getTime() <= now.getTime() + CLOCK_SKEW_MS;

/** A run's duration from the platform: a finite, non-negative number of ms up to this (no run lasts a week). */
export const MAX_DURATION_MS = 7 * 24 * 3_600_000;
export const duration = (v: unknown): number | null =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= MAX_DURATION_MS ? v : null;
