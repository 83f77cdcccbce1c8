import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import type { RowOf, SeriesTable } from "../stores/series/tables.js";
import type { Filter, FilterValue } from "../stores/series/types.js";
import { connectionScope } from "./scope.js";

/**
 * One newest-first page of a series, restricted to the connections the caller may see (or the
 * one asked for: 404 absent, 403 not visible), `since` inclusive and `until` exclusive,
 * continuing after `after`. `narrow` may cut the scope further (retention horizons).
 * A caller who sees no connection gets an empty page without touching the series.
 */
export async function visibleSeriesPage<T extends SeriesTable>(
  ctx: AppContext,
  actor: Actor,
  table: T,
  q: PageRequest & Window & { connectionId?: string },
  filters: Filter[],
  narrow?: (scope: Filter) => Promise<Filter>,
): Promise<Page<RowOf<T>>> {
  const visible = await connectionScope(ctx, actor, q.connectionId);
  const scope = visible && narrow ? await narrow(visible) : visible;
  if (!scope) return { rows: [], next: null };
  return ctx.stores.series.page(table, {
    where: [scope, ...filters],
    since: q.since,
    until: q.until,
    ...(q.after ? { after: q.after } : {}),
    limit: q.limit,
  });
}

/** Equality filters on series columns, in the order given; undefined values are left out. */
export function equalities(values: Record<string, FilterValue | undefined>): Filter[] {
  const filters: Filter[] = [];
  for (const [column, value] of Object.entries(values))
    if (value !== undefined) filters.push({ column, op: "eq", value });
  return filters;
}
