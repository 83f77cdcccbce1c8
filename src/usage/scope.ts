import { ApiError } from "../api/errors.js";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { connectionAccess, visibleConnectionIds } from "../identity/visibility.js";
import type { Filter } from "../stores/series/types.js";

/**
 * The connection filter for a series read: the one connection asked for (404 when absent, 403
 * when not visible), or every connection the caller may see. Null means the caller sees none.
 */
export async function connectionScope(
  ctx: AppContext,
  p: Principal,
  connectionId?: string,
): Promise<Filter | null> {
  if (connectionId) {
    const access = await connectionAccess(ctx.stores.db, p, connectionId);
    if (access === "absent") throw new ApiError(404, "NOT_FOUND", `Connection ${connectionId} not found`);
    if (access === "forbidden")
      throw new ApiError(403, "FORBIDDEN", `No access to connection ${connectionId}`);
    return { column: "connection_id", op: "eq", value: connectionId };
  }
  const ids = await visibleConnectionIds(ctx.stores.db, p);
  return ids.length ? { column: "connection_id", op: "in", value: ids } : null;
}
