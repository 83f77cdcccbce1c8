import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { requireAccess } from "./access.js";
import { keyStore } from "../identity/keys.js";
import { deleteConnectionRow } from "./repository.js";

/**
 * DELETE: removes the connection and, through the foreign key, its ingestion key. Its series
 * history stays until retention removes it. The key cache on this node forgets the bound key
 * at once; other nodes re-read keys within the key cache's TTL.
 */
export async function deleteConnection(ctx: AppContext, p: Actor, id: string) {
  const db = ctx.stores.db;
  await requireAccess(db, p, id);
  await deleteConnectionRow(db, id);
  keyStore(ctx).invalidate((k) => k.type === "ingestion_key" && k.connectionId === id);
  return { message: "Connection deleted" };
}
