import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { connectionNotFound, noAccess } from "./errors.js";
import { type Connection, getConnectionRowFor, toConnection } from "./repository.js";

/** One round trip: the row and whether the caller may see it (404 absent, 403 not visible). */
export async function getConnection(ctx: AppContext, p: Actor, id: string): Promise<Connection> {
  const row = await getConnectionRowFor(ctx.stores.db, p, id);
  if (!row) throw connectionNotFound();
  if (!row.visible) throw noAccess();
  return toConnection(row);
}
