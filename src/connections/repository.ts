import type { AppContext } from "../context.js";
import type { Queryable } from "../stores/relational/types.js";

export interface ConnectionRow extends Record<string, unknown> {
  id: string;
  user_id: string;
  organization_id: string | null;
  organization_name: string | null;
  service_type: string;
  service_name: string;
  status: string;
  base_url: string | null;
  api_key_enc: string | null;
  api_key_length: number;
  api_token_enc: string | null;
  api_token_length: number;
  region: string | null;
  team_id: string | null;
  configuration: unknown;
  created_at: Date;
  check_interval_seconds: number | null;
  failure_threshold: number | null;
  heartbeat_interval_seconds: number | null;
  heartbeat_grace_seconds: number | null;
  last_sync_at: Date | null;
}

/** The connection columns plus its organization's name; `extra` adds computed columns. */
export const selectConnection = (extra = "") => `
  SELECT c.*, o.name AS organization_name${extra ? `, ${extra}` : ""}
    FROM connections c
    LEFT JOIN organizations o ON o.id = c.organization_id`;

export async function getConnectionRow(db: Queryable, id: string): Promise<ConnectionRow | undefined> {
  const r = await db.query<ConnectionRow>(`${selectConnection()} WHERE c.id = $1`, [id]);
  return r.rows[0];
}

/** Credentials are never returned: a fixed run of asterisks when one is stored, else null. */
const MASK = "********";
const masked = (len: number) => (len > 0 ? MASK : null);

/** The single-connection shape of the spec (GET /v1/connections/{id}). */
export function toConnection(r: ConnectionRow) {
  return {
    id: r.id,
    service_type: r.service_type,
    service_name: r.service_name,
    status: r.status,
    base_url: r.base_url,
    api_key: masked(r.api_key_length),
    organization_id: r.organization_id,
    created_at: r.created_at.toISOString(),
  };
}

/** The list shape of the spec: every field, plus `organizations` and `_credential_lengths`. */
export function toListedConnection(r: ConnectionRow) {
  return {
    ...toConnection(r),
    api_token: masked(r.api_token_length),
    region: r.region,
    team_id: r.team_id,
    organizations: r.organization_id ? { id: r.organization_id, name: r.organization_name ?? "" } : null,
    configuration: r.configuration ?? null,
    _credential_lengths: { api_key: r.api_key_length, api_token: r.api_token_length },
    // Monitoring settings (null = the plan's default) and the last execution sync.
    check_interval_seconds: r.check_interval_seconds,
    failure_threshold: r.failure_threshold,
    heartbeat_interval_seconds: r.heartbeat_interval_seconds,
    heartbeat_grace_seconds: r.heartbeat_grace_seconds,
    last_sync_at: r.last_sync_at ? new Date(r.last_sync_at).toISOString() : null,
  };
}

/** The plaintext credentials, for the prober only. Never logged, never returned. */
export function decryptCredentials(ctx: AppContext, r: Pick<ConnectionRow, "api_key_enc" | "api_token_enc">) {
  return {
    apiKey: r.api_key_enc ? ctx.credentials.decrypt(r.api_key_enc) : null,
    apiToken: r.api_token_enc ? ctx.credentials.decrypt(r.api_token_enc) : null,
  };
}
