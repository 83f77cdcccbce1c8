import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import type { RowOf, SeriesTable } from "../stores/series/tables.js";
import type { Filter } from "../stores/series/types.js";
import { connectionScope } from "../usage/scope.js";
import { CursorCodec } from "./cursor.js";

export interface ReadPage<R> {
  data: R[];
  pagination: { next_cursor: string | null; has_more: boolean; limit: number };
}

export const emptyPage = <R>(limit: number): ReadPage<R> => ({
  data: [],
  pagination: { next_cursor: null, has_more: false, limit },
});

/**
 * One newest-first page of a series for the read API: visible connections only, `since`
 * inclusive and `until` exclusive, continuing after a signed cursor bound to this endpoint and
 * these filters.
 */
export async function seriesPage<T extends SeriesTable, R>(
  ctx: AppContext,
  p: Principal,
  table: T,
  endpoint: string,
  q: { limit: number; cursor?: string; since?: string; until?: string; connection_id?: string },
  filters: Filter[],
  toRow: (r: RowOf<T>) => R,
  narrow?: (scope: Filter) => Promise<Filter>,
): Promise<ReadPage<R>> {
  const visible = await connectionScope(ctx, p, q.connection_id);
  const scope = visible && narrow ? await narrow(visible) : visible;
  const fingerprint = CursorCodec.fingerprint({
    endpoint,
    connection_id: q.connection_id,
    since: q.since,
    until: q.until,
    filters,
  });
  const after = q.cursor ? ctx.cursors.decode(q.cursor, fingerprint) : undefined;
  if (!scope) return emptyPage(q.limit);
  const page = await ctx.stores.series.page(table, {
    where: [scope, ...filters],
    since: q.since ? new Date(q.since) : undefined,
    until: q.until ? new Date(q.until) : undefined,
    ...(after ? { after } : {}),
    limit: q.limit,
  });
  return {
    data: page.rows.map(toRow),
    pagination: {
      next_cursor: page.next ? ctx.cursors.encode(page.next, fingerprint) : null,
      has_more: page.next !== null,
      limit: q.limit,
    },
  };
}
