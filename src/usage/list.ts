import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Window } from "../core/page.js";
import { usageEntries } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { type UsageEntry, toUsageEntry } from "./entries.js";
import { connectionScope } from "../connections/scope.js";
import { equalities } from "../connections/scoped-page.js";

export interface UsageListQuery extends Window {
  connectionId?: string;
  workflowId?: string;
  executionId?: string;
  entity?: string;
  usageEntity?: "tokens" | "custom";
  limit: number;
  /** Rows to skip: the spec pages usage by offset. */
  offset: number;
}

/**
 * Raw usage entries of visible connections (or of one: 404 absent, 403 not visible), newest
 * first, one offset page of them and how many match in all. `since` inclusive, `until` exclusive.
 */
export async function listUsage(
  ctx: AppContext,
  actor: Actor,
  q: UsageListQuery,
): Promise<{ rows: UsageEntry[]; total: number }> {
  const scope = await connectionScope(ctx, actor, q.connectionId);
  if (!scope) return { rows: [], total: 0 };
  const where: Filter[] = [
    scope,
    ...equalities({
      workflow_id: q.workflowId,
      execution_id: q.executionId,
      entity: q.entity,
      usage_entity: q.usageEntity,
    }),
  ];
  const bounds = { where, since: q.since, until: q.until };
  const series = ctx.stores.series;
  const [page, total] = await Promise.all([
    series.page(usageEntries, { ...bounds, limit: q.limit, offset: q.offset }),
    series.count(usageEntries, bounds),
  ]);
  return { rows: page.rows.map(toUsageEntry), total };
}
