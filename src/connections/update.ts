import type { AppContext } from "../core/context.js";
import type { Actor } from "../core/actor.js";
import { asManager, mayPlaceIn, roleIn } from "../identity/visibility.js";
import { requireAccess } from "./access.js";
import {
  checkAllowedFields,
  checkMonitoringFields,
  checkProbeTarget,
  requestedOrganization,
} from "./create.js";
import { connectionNotFound, invalid, placementDenied } from "./errors.js";
import { type ConnectionChanges, getConnectionRow, toConnection, updateConnectionRow } from "./repository.js";
import { recordStatus } from "./status.js";
import { auditActorOf, auditCredentialsChanged } from "../notifications/audit.js";
import { MONITORING_FIELDS, type ServiceType, type UpdateConnectionBody } from "./schema.js";

/**
 * PUT: changes only the fields given. Changing the address or a credential puts the
 * connection back to `inactive` until the next check confirms it.
 */
export async function updateConnection(
  ctx: AppContext,
  actor: Actor,
  id: string,
  body: UpdateConnectionBody,
) {
  const p = asManager(actor);
  const fields = Object.keys(body).filter((k) => body[k as keyof UpdateConnectionBody] !== undefined);
  if (fields.length === 0) throw invalid("body", "name at least one field to change");
  const db = ctx.stores.db;
  await requireAccess(db, p, id);
  const current = await getConnectionRow(db, id);
  if (!current) throw connectionNotFound();
  const kind = current.service_type as ServiceType;
  checkAllowedFields(kind, body);

  const changes: ConnectionChanges = {
    service_name: body.service_name,
    base_url: body.base_url,
    region: body.region,
    team_id: body.team_id,
  };
  if (body.api_key !== undefined) {
    changes.api_key_enc = ctx.credentials.encrypt(body.api_key);
    changes.api_key_length = body.api_key.length;
  }
  if (body.api_token !== undefined) {
    changes.api_token_enc = ctx.credentials.encrypt(body.api_token);
    changes.api_token_length = body.api_token.length;
  }
  for (const f of MONITORING_FIELDS) changes[f] = body[f];
  if (body.configuration !== undefined)
    changes.configuration = body.configuration === null ? null : JSON.stringify(body.configuration);
  const targetOrg =
    body.organization_id === undefined
      ? current.organization_id
      : requestedOrganization(p, body.organization_id);
  await checkMonitoringFields(db, p, kind, targetOrg, body);
  if (body.organization_id !== undefined) {
    const target = targetOrg;
    if (target !== current.organization_id) {
      // taking a connection out of an organization removes it from every member's view, as a
      // delete does: the same rule, admin or owner there (docs/api.md: Connections API, Roles)
      if (current.organization_id) {
        const role = await roleIn(db, p.userId, current.organization_id);
        if (role !== "admin" && role !== "owner")
          throw placementDenied(
            `Moving a connection out of its organization needs the admin or owner role there; this key's user is ${role ? `a ${role}` : "not a member"}`,
          );
      }
      const denied = await mayPlaceIn(db, p, target);
      if (denied) throw placementDenied(denied);
      changes.organization_id = target;
      // made personal: it becomes the personal connection of whoever moved it
      if (target === null) changes.user_id = p.userId;
    }
  }
  await checkProbeTarget(ctx, kind, body.base_url);
  const reconfirm = ["base_url", "api_key", "api_token", "region"].some(
    (f) => body[f as keyof UpdateConnectionBody] !== undefined,
  );
  const at = ctx.now();
  const row = await db.transaction(async (tx) => {
    // A new address or credential is checked within seconds, from a clean slate, and the
    // connection is unconfirmed (inactive) until then: the status move is recordStatus's.
    await updateConnectionRow(tx, id, changes, at, { recheck: reconfirm });
    if (reconfirm) await recordStatus(tx, id, { type: "reconfigured" }, at);
    const updated = await getConnectionRow(tx, id);
    const credentials = (["api_key", "api_token"] as const).filter((f) => body[f] !== undefined);
    if (updated && credentials.length > 0)
      await auditCredentialsChanged(tx, {
        connectionId: id,
        name: updated.service_name,
        account: { userId: updated.user_id, organizationId: updated.organization_id },
        fields: credentials,
        at,
        by: auditActorOf(p),
      });
    return updated;
  });
  if (!row) throw connectionNotFound();
  return { message: "Connection updated", connection: toConnection(row) };
}
