import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { visibleConnectionsCondition } from "../identity/visibility.js";
import { connectionNotFound, noAccess } from "./errors.js";
import { type ConnectionRow, selectConnection, toConnection } from "./repository.js";

/** One round trip: the row and whether the caller may see it (404 absent, 403 not visible). */
export async function getConnection(ctx: AppContext, p: Principal, id: string) {
  const params: unknown[] = [id];
  const visible = visibleConnectionsCondition(p, (v) => {
    params.push(v);
    return `$${params.length}`;
  });
  const r = await ctx.stores.db.query<ConnectionRow & { visible: boolean }>(
    `${selectConnection(`${visible} AS visible`)} WHERE c.id = $1`,
    params,
  );
  const row = r.rows[0];
  if (!row) throw connectionNotFound();
  if (!row.visible) throw noAccess();
  return toConnection(row);
}
