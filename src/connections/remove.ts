import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { requireAccess } from "./access.js";

/**
 * DELETE: removes the connection and, through the foreign key, its ingestion key. Its series
 * history stays until retention removes it. The key cache on this node forgets the bound key
 * at once; other nodes re-read keys within the key cache's TTL.
 */
export async function deleteConnection(ctx: AppContext, p: Principal, id: string) {
  const db = ctx.stores.db;
  await requireAccess(db, p, id);
  await db.query("DELETE FROM connections WHERE id = $1", [id]);
  ctx.keys.invalidate((k) => k.connectionId === id);
  return { message: "Connection deleted" };
}
