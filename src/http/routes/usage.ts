import { z } from "zod";
import { listUsage } from "../../usage/list.js";
import { idempotencyKeyOf, recordUsage, validateUsageBody } from "../../usage/record.js";
import { listUsageQuery, MAX_BATCH, usageEntry, usageTotalsQuery } from "../../usage/schema.js";
import { usageTotals } from "../../usage/totals.js";
import { envelopeError } from "../responses/errors.js";
import { usageList, usageRecorded, usageTotals as usageTotalsBody } from "../responses/usage.js";
import { offsetPagination } from "../paging.js";
import { defineRoute } from "../route.js";

/** The Usage API. Errors use the envelope; a batch validation failure adds `validation_errors`. */
const base = { tag: "Usage", errorStyle: "envelope" } as const;

export const usageRoutes = [
  defineRoute({
    ...base,
    method: "POST",
    path: "/v1/usage",
    summary: `Record one usage entry or up to ${MAX_BATCH}`,
    description:
      "An optional `Idempotency-Key` header (1 to 255 visible ASCII characters, e.g. a UUID) makes a " +
      "resend safe: a batch sent again with the same key within 24 hours is stored once and answered " +
      "with the same entries (ids and timestamps); the same key with a different batch is a 409.",
    auth: "usage:write",
    ingest: true,
    body: z.union([usageEntry, z.array(usageEntry).max(MAX_BATCH)]),
    // every invalid entry is reported (validation_errors), not only the first problem
    parseBody: validateUsageBody,
    status: 201,
    responses: { 201: usageRecorded, 409: envelopeError },
    handler: ({ ctx, actor, body, reply }) =>
      recordUsage(ctx, actor, Array.isArray(body) ? body : [body], {
        idempotencyKey: idempotencyKeyOf(reply.request.headers["idempotency-key"]),
      }),
  }),
  defineRoute({
    ...base,
    method: "GET",
    path: "/v1/usage",
    summary: "Raw usage entries, newest first",
    auth: "usage:read",
    query: listUsageQuery,
    status: 200,
    responses: { 200: usageList },
    handler: async ({ ctx, actor, query: q }) => {
      const { rows, total } = await listUsage(ctx, actor, {
        connectionId: q.connection_id,
        workflowId: q.workflow_id,
        executionId: q.execution_id,
        entity: q.entity,
        usageEntity: q.usage_entity,
        since: q.start_date ? new Date(q.start_date) : undefined,
        // end_date is inclusive for REST callers; the query's bound is exclusive
        until: q.end_date ? new Date(Date.parse(q.end_date) + 1) : undefined,
        limit: q.limit,
        offset: q.offset,
      });
      return { usage_data: rows, pagination: offsetPagination(total, q, rows.length) };
    },
  }),
  defineRoute({
    ...base,
    method: "PUT",
    path: "/v1/usage",
    summary: "Usage totals of a connection or a run",
    description: "The spec puts the totals on PUT; they only read.",
    auth: "usage:read",
    query: usageTotalsQuery,
    status: 200,
    responses: { 200: usageTotalsBody },
    handler: ({ ctx, actor, query: q }) =>
      usageTotals(ctx, actor, {
        connectionId: q.connection_id,
        workflowId: q.workflow_id,
        executionId: q.execution_id,
        startDate: q.start_date ? new Date(q.start_date) : undefined,
        endDate: q.end_date ? new Date(q.end_date) : undefined,
      }),
  }),
];
