import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { visibleConnectionsCondition } from "../identity/visibility.js";
import { type ConnectionRow, selectConnection, toListedConnection } from "./repository.js";
import type { listConnectionsQuery } from "./schema.js";

export async function listConnections(
  ctx: AppContext,
  p: Principal,
  q: z.output<typeof listConnectionsQuery>,
) {
  const params: unknown[] = [];
  const param = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const conds = [visibleConnectionsCondition(p, param)];
  if (q.service_type) conds.push(`c.service_type = ${param(q.service_type)}`);
  if (q.status) conds.push(`c.status = ${param(q.status)}`);
  if (q.organization_id === "personal") conds.push("c.organization_id IS NULL");
  else if (q.organization_id) conds.push(`c.organization_id = ${param(q.organization_id)}`);
  const where = conds.join(" AND ");
  const db = ctx.stores.db;
  const [rows, total] = await Promise.all([
    db.query<ConnectionRow>(
      `${selectConnection()} WHERE ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT ${param(q.limit)} OFFSET ${param(q.offset)}`,
      params,
    ),
    db.query<{ n: number }>(`SELECT count(*) AS n FROM connections c WHERE ${where}`, params.slice(0, -2)),
  ]);
  const n = Number(total.rows[0]?.n ?? 0);
  return {
    connections: rows.rows.map(toListedConnection),
    pagination: { total: n, limit: q.limit, offset: q.offset, has_more: q.offset + rows.rows.length < n },
  };
}
