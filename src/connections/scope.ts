import { forbidden, notFound } from "../core/errors.js";
import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { connectionAccess, visibleConnectionIds } from "../identity/visibility.js";
import type { Filter } from "../stores/series/types.js";

/**
 * A read naming one connection: 404 when it does not exist, 403 when the caller may not see it
 * (the read API's messages name the id; the Connections API has its own, see access.ts).
 */
export async function requireReadable(ctx: AppContext, p: Actor, connectionId: string): Promise<void> {
  const access = await connectionAccess(ctx.stores.db, p, connectionId);
  if (access === "absent") throw notFound(`Connection ${connectionId} not found`);
  if (access === "forbidden") throw forbidden(`No access to connection ${connectionId}`);
}

/**
 * The connection filter for a series read: the one connection asked for (404 when absent, 403
 * when not visible), or every connection the caller may see. Null means the caller sees none.
 */
export async function connectionScope(
  ctx: AppContext,
  p: Actor,
  connectionId?: string,
): Promise<Filter | null> {
  if (connectionId) {
    await requireReadable(ctx, p, connectionId);
    return { column: "connection_id", op: "eq", value: connectionId };
  }
  const ids = await visibleConnectionIds(ctx.stores.db, p);
  return ids.length ? { column: "connection_id", op: "in", value: ids } : null;
}
