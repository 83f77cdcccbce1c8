import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { visibleConnectionsCondition } from "../identity/visibility.js";
import type { Row } from "../stores/relational/types.js";
import { connectionScope } from "../usage/scope.js";
import { CursorCodec } from "./cursor.js";

export interface RelationalPageQuery {
  limit: number;
  cursor?: string;
  since?: string;
  until?: string;
  connection_id?: string;
}

/**
 * One newest-first keyset page of a relational table that belongs to connections (incidents,
 * anomalies): visible connections only, `since`/`until` on `timeColumn`, equality filters, and
 * a signed cursor of (time, id) bound to the endpoint and filters. Table and column names come
 * from the callers' code, never from a request.
 */
export async function relationalPage<R extends Row & { id: string }>(
  ctx: AppContext,
  p: Principal,
  opts: {
    endpoint: string;
    table: "incidents" | "anomalies";
    timeColumn: "opened_at" | "detected_at";
    filters?: Record<string, string | undefined>;
  },
  q: RelationalPageQuery,
) {
  if (q.connection_id) await connectionScope(ctx, p, q.connection_id); // 404 / 403
  const filters = Object.fromEntries(Object.entries(opts.filters ?? {}).filter(([, v]) => v !== undefined));
  const fingerprint = CursorCodec.fingerprint({
    endpoint: opts.endpoint,
    connection_id: q.connection_id,
    since: q.since,
    until: q.until,
    ...filters,
  });
  const after = q.cursor ? ctx.cursors.decode(q.cursor, fingerprint) : undefined;
  const params: unknown[] = [];
  const param = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const t = opts.timeColumn;
  const conds = [visibleConnectionsCondition(p, param)];
  if (q.connection_id) conds.push(`x.connection_id = ${param(q.connection_id)}`);
  for (const [col, v] of Object.entries(filters)) conds.push(`x.${col} = ${param(v)}`);
  if (q.since) conds.push(`x.${t} >= ${param(q.since)}`);
  if (q.until) conds.push(`x.${t} < ${param(q.until)}`);
  if (after)
    conds.push(
      `(x.${t}, x.id) < (${param(after.ts.toISOString())}::timestamptz, ${param(after.key[0] ?? "")})`,
    );
  const r = await ctx.stores.db.query<R>(
    `SELECT x.* FROM ${opts.table} x JOIN connections c ON c.id = x.connection_id
      WHERE ${conds.join(" AND ")}
      ORDER BY x.${t} DESC, x.id DESC LIMIT ${param(q.limit + 1)}`,
    params,
  );
  const more = r.rows.length > q.limit;
  const rows = more ? r.rows.slice(0, q.limit) : r.rows;
  const last = rows[rows.length - 1];
  return {
    rows,
    pagination: {
      next_cursor:
        more && last
          ? ctx.cursors.encode({ ts: new Date(last[t] as Date), key: [last.id] }, fingerprint)
          : null,
      has_more: more,
      limit: q.limit,
    },
  };
}
