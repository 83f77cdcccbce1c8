import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { forbidden } from "../core/errors.js";
import { roleIn } from "../identity/visibility.js";
import { requireAccess } from "./access.js";
import { keyStore } from "../identity/keys.js";
import { deleteConnectionRow, getConnectionRow } from "./repository.js";
import { auditActorOf, auditConnectionDeleted } from "../notifications/audit.js";

/**
 * DELETE: removes the connection and, through the foreign key, its ingestion key. An
 * organization's connection needs the admin or owner role there (a member gets 403). Its series
 * history stays until retention removes it. The key cache on this node forgets the bound key
 * at once; other nodes re-read keys within the key cache's TTL. Audited: the account's owner(s)
 * are told, in the delete's transaction (the alert keeps the connection's name).
 */
export async function deleteConnection(ctx: AppContext, p: Actor, id: string) {
  const db = ctx.stores.db;
  await requireAccess(db, p, id);
  // an organization's connection is deleted by its admins and owners; members may add and edit
  const placed = await getConnectionRow(db, id);
  if (placed?.organization_id && (p.type === "api_key" || p.type === "user")) {
    const role = await roleIn(db, p.userId, placed.organization_id);
    if (role !== "admin" && role !== "owner")
      throw forbidden(
        `Deleting an organization's connection needs the admin or owner role in it; this key's user is ${role ? `a ${role}` : "not a member"}`,
      );
  }
  const at = ctx.now();
  await db.transaction(async (tx) => {
    const row = await getConnectionRow(tx, id);
    if (row)
      await auditConnectionDeleted(tx, {
        connectionId: id,
        name: row.service_name,
        serviceType: row.service_type,
        account: { userId: row.user_id, organizationId: row.organization_id },
        at,
        by: auditActorOf(p),
      });
    await deleteConnectionRow(tx, id);
  });
  keyStore(ctx).invalidate((k) => k.type === "ingestion_key" && k.connectionId === id);
  return { message: "Connection deleted" };
}
