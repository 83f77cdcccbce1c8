import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { executions, type RowOf } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { connectionScope } from "../usage/scope.js";
import type { executionsQuery } from "./schemas.js";
import { emptyPage, seriesPage } from "./series-page.js";

type Q = z.output<typeof executionsQuery>;

/** The execution row of the read API; `error` only with include_error_details=true. */
export function toExecution(r: RowOf<typeof executions>, withError: boolean) {
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

export async function listExecutions(ctx: AppContext, p: Principal, q: Q) {
  const filters: Filter[] = [];
  if (q.workflow_id) filters.push({ column: "workflow_id", op: "eq", value: q.workflow_id });
  if (q.status) filters.push({ column: "status", op: "eq", value: q.status });
  if (q.group_by === "workflow") return perWorkflow(ctx, p, q, filters);
  return seriesPage(ctx, p, executions, "executions", q, filters, (r) =>
    toExecution(r, q.include_error_details),
  );
}

/** group_by=workflow: per connection and workflow, runs, successes, errors, success rate and average duration. */
async function perWorkflow(ctx: AppContext, p: Principal, q: Q, filters: Filter[]) {
  const scope = await connectionScope(ctx, p, q.connection_id);
  if (!scope) return emptyPage(q.limit);
  const groups = await ctx.stores.series.aggregate(executions, {
    bucket: "all",
    where: [scope, ...filters],
    since: q.since ? new Date(q.since) : undefined,
    until: q.until ? new Date(q.until) : undefined,
    groupBy: ["connection_id", "workflow_id", "status"],
    measures: { runs: { fn: "count" }, avg_ms: { fn: "avg", column: "duration_ms" } },
  });
  const byWorkflow = new Map<
    string,
    {
      connection_id: string;
      workflow_id: string | null;
      runs: number;
      successes: number;
      errors: number;
      durSum: number;
      durRuns: number;
    }
  >();
  for (const g of groups) {
    const k = `${g.connection_id}\u0000${g.workflow_id ?? ""}`;
    const w = byWorkflow.get(k) ?? {
      connection_id: String(g.connection_id),
      workflow_id: (g.workflow_id as string | null) ?? null,
      runs: 0,
      successes: 0,
      errors: 0,
      durSum: 0,
      durRuns: 0,
    };
    const n = Number(g.runs ?? 0);
    w.runs += n;
    if (g.status === "success") w.successes += n;
    if (g.status === "error") w.errors += n;
    if (g.avg_ms !== null) {
      w.durSum += Number(g.avg_ms) * n;
      w.durRuns += n;
    }
    byWorkflow.set(k, w);
  }
  const data = [...byWorkflow.values()]
    .sort((a, b) => b.runs - a.runs)
    .slice(0, q.limit)
    .map(({ durSum, durRuns, ...w }) => ({
      ...w,
      success_rate: w.runs ? Math.round((w.successes / w.runs) * 10_000) / 10_000 : null,
      avg_duration_ms: durRuns ? Math.round((durSum / durRuns) * 10) / 10 : null,
    }));
  return { data, pagination: { next_cursor: null, has_more: byWorkflow.size > data.length, limit: q.limit } };
}
