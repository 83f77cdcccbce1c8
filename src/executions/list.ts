import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { equalities, visibleSeriesPage } from "../connections/scoped-page.js";
import { executions, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";

/** The spec's execution statuses. */
export type ExecutionStatus = "running" | "success" | "error" | "waiting" | "cancelled";

/** One workflow run (the spec's execution record); `error` only when error details were asked for. */
export interface Execution {
  connection_id: string;
  execution_id: string;
  workflow_id: string | null;
  status: string;
  mode: string | null;
  started_at: string;
  stopped_at: string | null;
  duration_ms: number | null;
  error?: string | null;
}

/** Which runs: of one connection (or all visible), one workflow, one status. */
export interface ExecutionFilter extends Window {
  connectionId?: string;
  workflowId?: string;
  status?: ExecutionStatus;
}

export interface ExecutionsQuery extends ExecutionFilter, PageRequest {
  includeErrorDetails: boolean;
}

export function toExecution(r: RowOf<typeof executions>, withError: boolean): Execution {
  return {
    connection_id: r.connection_id,
    execution_id: r.execution_id,
    workflow_id: r.workflow_id ?? null,
    status: r.status,
    mode: r.mode ?? null,
    started_at: r.ts.toISOString(),
    stopped_at: r.stopped_at ? r.stopped_at.toISOString() : null,
    duration_ms: r.duration_ms ?? null,
    ...(withError ? { error: r.error ?? null } : {}),
  };
}

/**
 * The series filters of an execution query besides the connection scope. Exported because the
 * REST cursor binds itself to them (its fingerprint has always included them).
 */
export function executionFilters(q: Pick<ExecutionFilter, "workflowId" | "status">): Filter[] {
  return equalities({ workflow_id: q.workflowId, status: q.status });
}

/** Runs of visible connections, newest start first. */
export async function listExecutions(
  ctx: AppContext,
  actor: Actor,
  q: ExecutionsQuery,
): Promise<Page<Execution>> {
  const page = await visibleSeriesPage(ctx, actor, executions, q, executionFilters(q));
  return { rows: page.rows.map((r) => toExecution(r, q.includeErrorDetails)), next: page.next };
}
