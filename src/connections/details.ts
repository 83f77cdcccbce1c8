import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { connectionNotFound, noAccess } from "./errors.js";
import { getConnectionRowFor, type ListedConnection, toListedConnection } from "./repository.js";

/**
 * One connection with every field the list shows (its organization, region, monitoring settings,
 * stored credentials' lengths, never their values), in one round trip: 404 when it does not exist,
 * 403 when the caller may not see it. The dashboard's connection and edit pages read it; it is
 * `getConnection` with the list's record.
 */
export async function getConnectionDetails(ctx: AppContext, p: Actor, id: string): Promise<ListedConnection> {
  const row = await getConnectionRowFor(ctx.stores.db, p, id);
  if (!row) throw connectionNotFound();
  if (!row.visible) throw noAccess();
  return toListedConnection(row);
}
