import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { ServiceError } from "../core/errors.js";
import type { Page, Position } from "../core/page.js";
import { executions } from "../stores/series/tables.js";
import { connectionScope } from "../connections/scope.js";
import { type ExecutionFilter, executionFilters } from "./list.js";
import { nameKey, workflowNames } from "./repository.js";

/** Runs of one workflow of one connection over the window. */
export interface WorkflowAggregate {
  connection_id: string;
  workflow_id: string | null;
  workflow_name: string | null;
  runs: number;
  successes: number;
  errors: number;
  /** Fraction 0–1 of runs that succeeded, to 4 decimals. */
  success_rate: number | null;
  /** Milliseconds to 1 decimal; null when no run has a duration. */
  avg_duration_ms: number | null;
}

/** The order of the aggregates: most runs first, then connection id, then workflow id (null first). */
type Ranked = { runs: number; connection_id: string; workflow_id: string | null };
function compare(a: Ranked, b: Ranked): number {
  if (a.runs !== b.runs) return b.runs - a.runs;
  if (a.connection_id !== b.connection_id) return a.connection_id < b.connection_id ? -1 : 1;
  const wa = a.workflow_id ?? "";
  const wb = b.workflow_id ?? "";
  return wa === wb ? 0 : wa < wb ? -1 : 1;
}
/** An aggregate's place in that order, as a page position (`ts` is unused: aggregates span the window). */
const positionOf = (w: Ranked): Position => ({
  ts: new Date(0),
  key: [String(w.runs), w.connection_id, w.workflow_id ?? ""],
});
function rankedOf(p: Position): Ranked | null {
  const [runs, connection_id, workflow_id] = p.key;
  const n = Number(runs);
  if (!Number.isSafeInteger(n) || n < 0 || connection_id === undefined || workflow_id === undefined)
    return null;
  return { runs: n, connection_id, workflow_id: workflow_id === "" ? null : workflow_id };
}

/**
 * Per connection and workflow: runs, successes, errors, success rate and average duration, the
 * busiest workflows first (then by connection and workflow id), `limit` at a time; `after` (the
 * position of the last aggregate of the previous page) continues after it. The aggregates are
 * computed afresh for every page, so counts that change meanwhile can move a workflow across
 * the page boundary.
 */
export async function executionsByWorkflow(
  ctx: AppContext,
  actor: Actor,
  q: ExecutionFilter & { limit: number; after?: Position },
): Promise<Page<WorkflowAggregate>> {
  const scope = await connectionScope(ctx, actor, q.connectionId);
  if (!scope) return { rows: [], next: null };
  const groups = await ctx.stores.series.aggregate(executions, {
    bucket: "all",
    where: [scope, ...executionFilters(q)],
    since: q.since,
    until: q.until,
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
  const sorted = [...byWorkflow.values()].sort(compare);
  const after = q.after ? rankedOf(q.after) : null;
  if (q.after && !after)
    throw new ServiceError(
      "invalid_input",
      "cursor: not a position of this query; start again without a cursor",
      {
        field: "cursor",
        reason: "invalid_cursor",
        details: { parameter: "cursor" },
      },
    );
  const rest = after ? sorted.filter((w) => compare(w, after) > 0) : sorted;
  const top = rest.slice(0, q.limit);
  const names = await workflowNames(
    ctx.stores.db,
    top.map((w) => ({ connectionId: w.connection_id, workflowId: w.workflow_id })),
  );
  const rows = top.map(({ durSum, durRuns, ...w }) => ({
    connection_id: w.connection_id,
    workflow_id: w.workflow_id,
    workflow_name: w.workflow_id ? (names.get(nameKey(w.connection_id, w.workflow_id)) ?? null) : null,
    runs: w.runs,
    successes: w.successes,
    errors: w.errors,
    success_rate: w.runs ? Math.round((w.successes / w.runs) * 10_000) / 10_000 : null,
    avg_duration_ms: durRuns ? Math.round((durSum / durRuns) * 10) / 10 : null,
  }));
  const last = top[top.length - 1];
  return { rows, next: rest.length > top.length && last ? positionOf(last) : null };
}
