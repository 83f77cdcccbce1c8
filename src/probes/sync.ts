import type { Agent } from "undici";
import type { AppContext } from "../core/context.js";
import { markLate } from "../anomalies/late.js";
import { freshWorkflowIds, upsertWorkflowNames } from "../executions/repository.js";
import { executions, type RowOf } from "../stores/series/tables.js";
import { SYNC_BUDGET, type PlatformRun, type SyncBudget, type SyncState } from "./platform.js";
import { syncWorkflowA } from "./workflow-a.js";
import { syncWorkflowB, workflowBApi } from "./workflow-b.js";
import { syncRequests, syncRuns } from "../lib/metrics.js";
import { traced } from "../lib/tracing.js";

export type { SyncState } from "./platform.js";

type Execution = RowOf<typeof executions>;

export interface SyncTarget {
  id: string;
  serviceType: "workflow_a" | "workflow_b";
  baseUrl: string | null;
  apiKey: string | null;
  apiToken: string | null;
  region: string | null;
  teamId: string | null;
  state: SyncState;
  lastSyncAt: Date | null;
  /**
   * workflow_a: the workflow ids whose names were read within NAME_TTL_MS, when the caller has
   * them already (the probe worker reads them with its claim); else they are read here.
   */
  freshWorkflowIds?: ReadonlySet<string>;
  /** workflow_a: the run list's first page, read by the check moments ago (syncWorkflowA's `firstPage`). */
  firstPage?: unknown;
}

/** A name is asked for again after this long (renames show within it). */
export const NAME_TTL_MS = 6 * 3_600_000;

function toRow(connectionId: string, r: PlatformRun, now: Date): Execution {
  return {
    ts: r.ts,
    connection_id: connectionId,
    execution_id: r.id,
    workflow_id: r.workflowId,
    status: r.status,
    mode: r.mode,
    stopped_at: r.stoppedAt,
    duration_ms: r.durationMs,
    error: r.error,
    error_node: r.errorNode,
    last_node: r.lastNode,
    updated_at: now,
  } as Execution;
}

/** A tick stops starting requests after this long (check.ts passes a share of the probe lease). */
export const SYNC_DEADLINE_MS = 15_000;

export interface SyncResult {
  written: number;
  state: SyncState;
  requests: number;
  stoppedBy: string | null;
  /** False when nothing was asked (held off by a `Retry-After`, or no credentials): `last_sync_at` stays. */
  synced: boolean;
  warnings: string[];
}

/**
 * Pulls a connection's runs into the series store after a successful check, within `budget`
 * and `deadlineMs` (what does not fit continues at the next tick; see the adapters: no request
 * starts after the deadline, so a tick ends within it plus one request's timeout). Rows are keyed
 * by the platform's run id at the start Vigil first stored: pulling a run again replaces its row,
 * so a run that ends (running -> success) or resumes is updated in place, never duplicated.
 * While a platform's `Retry-After` runs, nothing is asked and `synced` is false.
 */
export const syncExecutions = traced(
  "vigil.probe.sync",
  {
    attributes: (_ctx, _agent, t) => ({
      "vigil.connection.id": t.id,
      "vigil.connection.kind": t.serviceType,
    }),
    result: (r) => ({
      "vigil.sync.requests": r.requests,
      "vigil.sync.runs_written": r.written,
      ...(r.stoppedBy ? { "vigil.sync.stopped_by": r.stoppedBy } : {}),
    }),
  },
  sync,
);

async function sync(
  ctx: AppContext,
  agent: Agent,
  t: SyncTarget,
  timeoutMs: number,
  budget: SyncBudget = SYNC_BUDGET,
  deadlineMs: number = SYNC_DEADLINE_MS,
): Promise<SyncResult> {
  const now = ctx.now();
  const idle = { written: 0, state: t.state, requests: 0, stoppedBy: null, synced: false, warnings: [] };
  if (t.state.backoffUntil && Date.parse(t.state.backoffUntil) > now.getTime()) return idle;
  const prev = { ...t.state };
  delete prev.backoffUntil;
  const limits = { now, deadline: Date.now() + deadlineMs };

  let out;
  if (t.serviceType === "workflow_a" && t.baseUrl && t.apiKey) {
    const known =
      t.freshWorkflowIds ??
      (await freshWorkflowIds(ctx.stores.db, t.id, new Date(now.getTime() - NAME_TTL_MS)));
    out = await syncWorkflowA(
      agent,
      { baseUrl: t.baseUrl, apiKey: t.apiKey },
      prev,
      budget,
      timeoutMs,
      known,
      limits,
      t.firstPage,
    );
  } else if (t.serviceType === "workflow_b" && t.apiToken && t.teamId)
    out = await syncWorkflowB(
      agent,
      {
        api: workflowBApi(ctx.config.workflowBApiTemplate, t.region),
        apiToken: t.apiToken,
        teamId: t.teamId,
      },
      prev,
      budget,
      timeoutMs,
      limits,
    );
  else return idle;

  syncRequests.labels(t.serviceType).inc(out.requests);
  syncRuns.labels(t.serviceType, out.stoppedBy ? "stopped" : "synced").inc();
  if (out.runs.length) {
    const rows = out.runs.map((r) => toRow(t.id, r, now));
    await ctx.stores.series.append(executions, rows);
    // executions started a while ago (synced late, or finished since): the detector judges them again
    const late = markLate(ctx, rows);
    if (late) await late;
  }
  if (out.names.length) await upsertWorkflowNames(ctx.stores.db, t.id, out.names, now);
  const state = out.state;
  if (out.retryAfterMs) state.backoffUntil = new Date(now.getTime() + out.retryAfterMs).toISOString();
  if (out.stoppedBy === "deadline")
    ctx.log.info(
      { connection: t.id, requests: out.requests },
      "execution sync: the tick's time ran out; continuing at the next one",
    );
  else if (out.stoppedBy)
    ctx.log.info(
      { connection: t.id, stoppedBy: out.stoppedBy, retryAfterMs: out.retryAfterMs },
      "execution sync paused: the platform asked for quiet or cannot be reached; continuing later",
    );
  for (const w of out.warnings) ctx.log.warn({ connection: t.id }, `execution sync: ${w}`);
  return {
    written: out.runs.length,
    state,
    requests: out.requests,
    stoppedBy: out.stoppedBy,
    synced: true,
    warnings: out.warnings,
  };
}
