import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { mayPlaceIn } from "../identity/visibility.js";
import { requireAccess } from "./access.js";
import { checkAllowedFields, checkMonitoringFields, requestedOrganization } from "./create.js";
import { connectionNotFound, invalid, placementDenied } from "./errors.js";
import { getConnectionRow, toConnection } from "./repository.js";
import { MONITORING_FIELDS, type ServiceType, type UpdateConnectionBody } from "./schema.js";

/**
 * PUT: changes only the fields given. Changing the address or a credential puts the
 * connection back to `inactive` until the next check confirms it.
 */
export async function updateConnection(
  ctx: AppContext,
  p: Principal,
  id: string,
  body: UpdateConnectionBody,
) {
  const fields = Object.keys(body).filter((k) => body[k as keyof UpdateConnectionBody] !== undefined);
  if (fields.length === 0) throw invalid("body", "name at least one field to change");
  const db = ctx.stores.db;
  await requireAccess(db, p, id);
  const current = await getConnectionRow(db, id);
  if (!current) throw connectionNotFound();
  const kind = current.service_type as ServiceType;
  checkAllowedFields(kind, body);

  const sets: string[] = [];
  const params: unknown[] = [id];
  const set = (col: string, v: unknown) => {
    params.push(v);
    sets.push(`${col} = $${params.length}`);
  };
  if (body.service_name !== undefined) set("service_name", body.service_name);
  if (body.base_url !== undefined) set("base_url", body.base_url);
  if (body.api_key !== undefined) {
    set("api_key_enc", ctx.credentials.encrypt(body.api_key));
    set("api_key_length", body.api_key.length);
  }
  if (body.api_token !== undefined) {
    set("api_token_enc", ctx.credentials.encrypt(body.api_token));
    set("api_token_length", body.api_token.length);
  }
  if (body.region !== undefined) set("region", body.region);
  for (const f of MONITORING_FIELDS) if (body[f] !== undefined) set(f, body[f]);
  if (body.team_id !== undefined) set("team_id", body.team_id);
  if (body.configuration !== undefined)
    set("configuration", body.configuration === null ? null : JSON.stringify(body.configuration));
  const targetOrg =
    body.organization_id === undefined
      ? current.organization_id
      : requestedOrganization(p, body.organization_id);
  await checkMonitoringFields(db, p, kind, targetOrg, body);
  if (body.organization_id !== undefined) {
    const target = targetOrg;
    if (target !== current.organization_id) {
      const denied = await mayPlaceIn(db, p, target);
      if (denied) throw placementDenied(denied);
      set("organization_id", target);
    }
  }
  const reconfirm = ["base_url", "api_key", "api_token", "region"].some(
    (f) => body[f as keyof UpdateConnectionBody] !== undefined,
  );
  // A new address or credential is checked within seconds, from a clean slate.
  if (reconfirm)
    sets.push(
      "status = 'inactive'",
      "next_check_at = now()",
      "consecutive_failures = 0",
      "consecutive_successes = 0",
    );
  sets.push("updated_at = now()");
  await db.query(`UPDATE connections SET ${sets.join(", ")} WHERE id = $1`, params);
  const row = await getConnectionRow(db, id);
  if (!row) throw connectionNotFound();
  return { message: "Connection updated", connection: toConnection(row) };
}
