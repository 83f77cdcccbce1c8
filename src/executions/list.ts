import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { equalities, visibleSeriesPage } from "../connections/scoped-page.js";
import { executions, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { nameKey, workflowNames } from "./repository.js";

/** The spec's execution statuses. */
export type ExecutionStatus = "running" | "success" | "error" | "waiting" | "cancelled";

/** One workflow run (the spec's execution record); `error` only when error details were asked for. */
export interface Execution {
  connection_id: string;
  execution_id: string;
  workflow_id: string | null;
  /** As the platform last reported it (executions/repository.ts); null until known. */
  workflow_name: string | null;
  status: string;
  mode: string | null;
  started_at: string;
  stopped_at: string | null;
  duration_ms: number | null;
  error?: string | null;
  error_node?: string | null;
  last_node?: string | null;
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

export function toExecution(
  r: RowOf<typeof executions>,
  withError: boolean,
  names: Map<string, string>,
): Execution {
  return {
    connection_id: r.connection_id,
    execution_id: r.execution_id,
    workflow_id: r.workflow_id ?? null,
    workflow_name: r.workflow_id ? (names.get(nameKey(r.connection_id, r.workflow_id)) ?? null) : null,
    status: r.status,
    mode: r.mode ?? null,
    started_at: r.ts.toISOString(),
    stopped_at: r.stopped_at ? r.stopped_at.toISOString() : null,
    duration_ms: r.duration_ms ?? null,
    ...(withError
      ? { error: r.error ?? null, error_node: r.error_node ?? null, last_node: r.last_node ?? null }
      : {}),
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
  const names = await workflowNames(
    ctx.stores.db,
    page.rows.map((r) => ({ connectionId: r.connection_id, workflowId: r.workflow_id ?? null })),
  );
  return { rows: page.rows.map((r) => toExecution(r, q.includeErrorDetails, names)), next: page.next };
}
