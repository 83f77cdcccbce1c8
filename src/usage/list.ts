import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { usageEntries } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { toUsageEntry } from "./entries.js";
import type { listUsageQuery } from "./schema.js";
import { connectionScope } from "./scope.js";

/** GET /v1/usage: raw entries of visible connections, newest first, offset pages. */
export async function listUsage(ctx: AppContext, p: Principal, q: z.output<typeof listUsageQuery>) {
  const scope = await connectionScope(ctx, p, q.connection_id);
  const empty = {
    usage_data: [],
    pagination: { total: 0, limit: q.limit, offset: q.offset, has_more: false },
  };
  if (!scope) return empty;
  const where: Filter[] = [scope];
  for (const col of ["workflow_id", "execution_id", "entity", "usage_entity"] as const) {
    const v = q[col];
    if (v !== undefined) where.push({ column: col, op: "eq", value: v });
  }
  const bounds = {
    where,
    since: q.start_date ? new Date(q.start_date) : undefined,
    // end_date is inclusive for callers; the store's bound is exclusive
    until: q.end_date ? new Date(Date.parse(q.end_date) + 1) : undefined,
  };
  const series = ctx.stores.series;
  const [page, total] = await Promise.all([
    series.page(usageEntries, { ...bounds, limit: q.limit, offset: q.offset }),
    series.count(usageEntries, bounds),
  ]);
  return {
    usage_data: page.rows.map(toUsageEntry),
    pagination: { total, limit: q.limit, offset: q.offset, has_more: q.offset + page.rows.length < total },
  };
}
