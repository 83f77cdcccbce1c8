import type { Actor } from "../../core/actor.js";
import type { AppContext } from "../../core/context.js";
import type { Page, Position } from "../../core/page.js";
import { metrics } from "../../analytics/metrics.js";
import { listAnomalies } from "../../anomalies/list.js";
import { availabilityFilters, listAvailability } from "../../availability/list.js";
import { availabilitySummary } from "../../availability/summary.js";
import { executionsByWorkflow } from "../../executions/by-workflow.js";
import { executionFilters, listExecutions } from "../../executions/list.js";
import { requireReadable } from "../../connections/scope.js";
import { CursorCodec } from "../cursor.js";
import { decodeCursor, restPage } from "../paging.js";
import {
  analyticsQuery,
  anomaliesQuery,
  availabilityQuery,
  executionsQuery,
  summaryQuery,
} from "../read-queries.js";
import { anomalyPage, availabilityPage, executionsPage, metricPage, summaryPage } from "../responses/read.js";
import { defineRoute } from "../route.js";

/** The REST parameters every keyset-paged read shares. */
interface KeysetParams {
  connection_id?: string;
  since?: string;
  until?: string;
  cursor?: string;
  limit: number;
}

/** The query functions' window and connection, from the REST strings. */
const windowOf = (q: KeysetParams) => ({
  connectionId: q.connection_id,
  since: q.since ? new Date(q.since) : undefined,
  until: q.until ? new Date(q.until) : undefined,
});

/**
 * What a read cursor is bound to: the endpoint, the connection, the window and the filters that
 * decide which rows exist (`bound`), not how rows are shown (include_error_details) or how many
 * (limit). These are the shapes cursors have always been signed with, so a cursor issued before
 * an upgrade still continues after it.
 */
export const readFingerprint = (q: KeysetParams, bound: Record<string, unknown>) =>
  CursorCodec.fingerprint({ connection_id: q.connection_id, since: q.since, until: q.until, ...bound });

/**
 * One keyset page at the REST edge: the cursor is decoded here, the query function gets the
 * position, and the page is shaped with a new cursor. With `connectionFirst`, an unknown or
 * foreign connection_id is answered (404/403) before a refused cursor, as those endpoints always
 * did (analytics always refused the cursor first); the connection is looked up only then.
 */
async function keyset<R>(
  ctx: AppContext,
  actor: Actor,
  q: KeysetParams,
  bound: Record<string, unknown>,
  connectionFirst: boolean,
  run: (after: Position | undefined) => Promise<Page<R>>,
) {
  const fingerprint = readFingerprint(q, bound);
  let after: Position | undefined;
  try {
    after = decodeCursor(ctx, q.cursor, fingerprint);
  } catch (err) {
    if (connectionFirst && q.connection_id) await requireReadable(ctx, actor, q.connection_id);
    throw err;
  }
  return restPage(ctx, await run(after), q.limit, fingerprint);
}

/** The read API (analytics:read): `{data, pagination}` with opaque cursors; errors in the envelope. */
const base = {
  tag: "Read",
  method: "GET",
  auth: "analytics:read",
  errorStyle: "envelope",
  status: 200,
} as const;

export const readRoutes = [
  defineRoute({
    ...base,
    path: "/v1/availability",
    summary: "Availability samples",
    query: availabilityQuery,
    responses: { 200: availabilityPage },
    handler: ({ ctx, actor, query: q }) => {
      const input = { available: q.is_available, includeSynthetic: q.include_synthetic };
      const bound = { endpoint: "availability", filters: availabilityFilters(input) };
      return keyset(ctx, actor, q, bound, true, (after) =>
        listAvailability(ctx, actor, { ...input, ...windowOf(q), limit: q.limit, after }),
      );
    },
  }),
  defineRoute({
    ...base,
    path: "/v1/availability/summary",
    summary: "Uptime per connection over a window",
    query: summaryQuery,
    responses: { 200: summaryPage },
    description:
      "`since` and `until` narrow the window (exactly for `day`, at whole UTC days for `week` and `month`); " +
      "rows page by connection id.",
    handler: ({ ctx, actor, query: q }) =>
      keyset(ctx, actor, q, { endpoint: "summary", window: q.window }, true, (after) =>
        availabilitySummary(ctx, actor, { ...windowOf(q), window: q.window, limit: q.limit, after }),
      ),
  }),
  defineRoute({
    ...base,
    path: "/v1/executions",
    summary: "Executions or per-workflow aggregates",
    query: executionsQuery,
    responses: { 200: executionsPage },
    handler: async ({ ctx, actor, query: q }) => {
      const filter = { ...windowOf(q), workflowId: q.workflow_id, status: q.status };
      // per-workflow aggregates page by their rank (most runs first), with cursors of their own
      if (q.group_by === "workflow") {
        const byWorkflow = { endpoint: "executions_by_workflow", filters: executionFilters(filter) };
        return keyset(ctx, actor, q, byWorkflow, true, (after) =>
          executionsByWorkflow(ctx, actor, { ...filter, limit: q.limit, after }),
        );
      }
      const bound = { endpoint: "executions", filters: executionFilters(filter) };
      return keyset(ctx, actor, q, bound, true, (after) =>
        listExecutions(ctx, actor, {
          ...filter,
          includeErrorDetails: q.include_error_details,
          limit: q.limit,
          after,
        }),
      );
    },
  }),
  defineRoute({
    ...base,
    path: "/v1/analytics",
    summary: "Metric rows by calendar bucket",
    query: analyticsQuery,
    responses: { 200: metricPage },
    handler: ({ ctx, actor, query: q }) =>
      keyset(ctx, actor, q, { endpoint: "analytics", metric: q.metric_type }, false, (after) =>
        metrics(ctx, actor, { ...windowOf(q), metricType: q.metric_type, limit: q.limit, after }),
      ),
  }),
  defineRoute({
    ...base,
    path: "/v1/anomalies",
    summary: "Anomalies",
    query: anomaliesQuery,
    responses: { 200: anomalyPage },
    handler: ({ ctx, actor, query: q }) => {
      // the status filter is bound only when given (the fingerprint has no key for it otherwise)
      const bound = { endpoint: "anomalies", ...(q.status !== undefined ? { status: q.status } : {}) };
      return keyset(ctx, actor, q, bound, true, (after) =>
        listAnomalies(ctx, actor, { ...windowOf(q), status: q.status, limit: q.limit, after }),
      );
    },
  }),
];
