import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { visibleConnectionsCondition } from "../identity/repository.js";
import type { Queryable } from "../stores/relational/types.js";
import type { ConnectionStatus } from "./schema.js";

/**
 * Every statement on the `connections` table that the create/get/list/update/remove verbs run.
 * Each function takes a `Queryable`: the store, or a transaction the caller holds open. Column
 * names come from this file, never from a request. The status column has one writer,
 * `recordStatus` (status.ts); nothing here changes it after the insert.
 */

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
const selectConnection = (extra = "") => `
  SELECT c.*, o.name AS organization_name${extra ? `, ${extra}` : ""}
    FROM connections c
    LEFT JOIN organizations o ON o.id = c.organization_id`;

/** Bind values and `param`, which appends one and returns its placeholder. */
function binder(initial: unknown[] = []) {
  const params = [...initial];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

export async function getConnectionRow(db: Queryable, id: string): Promise<ConnectionRow | undefined> {
  const r = await db.query<ConnectionRow>(`${selectConnection()} WHERE c.id = $1`, [id]);
  return r.rows[0];
}

/** One row and whether the actor may see it, in one round trip (undefined when absent). */
export async function getConnectionRowFor(
  db: Queryable,
  actor: Actor,
  id: string,
): Promise<(ConnectionRow & { visible: boolean }) | undefined> {
  const { params, param } = binder([id]);
  const visible = visibleConnectionsCondition(actor, param);
  const r = await db.query<ConnectionRow & { visible: boolean }>(
    `${selectConnection(`${visible} AS visible`)} WHERE c.id = $1`,
    params,
  );
  return r.rows[0];
}

export interface ConnectionListFilter {
  serviceType?: string;
  status?: string;
  /** An organization's id, or `personal` for connections outside any organization. */
  organizationId?: string;
  limit: number;
  offset: number;
}

/** The actor's visible connections, newest first, one offset page and the count of all that match. */
export async function listConnectionRows(
  db: Queryable,
  actor: Actor,
  f: ConnectionListFilter,
): Promise<{ rows: ConnectionRow[]; total: number }> {
  const { params, param } = binder();
  const conds = [visibleConnectionsCondition(actor, param)];
  if (f.serviceType) conds.push(`c.service_type = ${param(f.serviceType)}`);
  if (f.status) conds.push(`c.status = ${param(f.status)}`);
  if (f.organizationId === "personal") conds.push("c.organization_id IS NULL");
  else if (f.organizationId) conds.push(`c.organization_id = ${param(f.organizationId)}`);
  const where = conds.join(" AND ");
  const countParams = [...params];
  const [rows, total] = await Promise.all([
    db.query<ConnectionRow>(
      `${selectConnection()} WHERE ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT ${param(f.limit)} OFFSET ${param(f.offset)}`,
      params,
    ),
    db.query<{ n: number }>(`SELECT count(*) AS n FROM connections c WHERE ${where}`, countParams),
  ]);
  return { rows: rows.rows, total: Number(total.rows[0]?.n ?? 0) };
}

/** A new connection's stored fields: credentials already encrypted. */
export interface NewConnection {
  id: string;
  userId: string;
  organizationId: string | null;
  serviceType: string;
  serviceName: string;
  baseUrl: string | null;
  apiKeyEnc: string | null;
  apiKeyLength: number;
  apiTokenEnc: string | null;
  apiTokenLength: number;
  region: string | null;
  teamId: string | null;
  /** JSON text, or null. */
  configuration: string | null;
  checkIntervalSeconds: number | null;
  failureThreshold: number | null;
  heartbeatIntervalSeconds: number | null;
  heartbeatGraceSeconds: number | null;
}

/** Inserts a connection, `inactive` until its first check or heartbeat, created at `at`. */
export async function insertConnection(tx: Queryable, c: NewConnection, at: Date): Promise<void> {
  await tx.query(
    `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url,
                              api_key_enc, api_key_length, api_token_enc, api_token_length, region, team_id, configuration,
                              check_interval_seconds, failure_threshold, heartbeat_interval_seconds, heartbeat_grace_seconds,
                              created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, 'inactive', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)`,
    [
      c.id,
      c.userId,
      c.organizationId,
      c.serviceType,
      c.serviceName,
      c.baseUrl,
      c.apiKeyEnc,
      c.apiKeyLength,
      c.apiTokenEnc,
      c.apiTokenLength,
      c.region,
      c.teamId,
      c.configuration,
      c.checkIntervalSeconds,
      c.failureThreshold,
      c.heartbeatIntervalSeconds,
      c.heartbeatGraceSeconds,
      at.toISOString(),
    ],
  );
}

/** The columns an update may set (never `status`: that is `recordStatus`'s). */
export type ConnectionChanges = Partial<{
  service_name: string;
  base_url: string;
  api_key_enc: string;
  api_key_length: number;
  api_token_enc: string;
  api_token_length: number;
  region: string | null;
  team_id: string | null;
  /** JSON text, or null. */
  configuration: string | null;
  organization_id: string | null;
  /** The owner: changes only when an organization's connection becomes someone's personal one. */
  user_id: string;
  check_interval_seconds: number | null;
  failure_threshold: number | null;
  heartbeat_interval_seconds: number | null;
  heartbeat_grace_seconds: number | null;
}>;

const CHANGEABLE: readonly (keyof ConnectionChanges)[] = [
  "service_name",
  "base_url",
  "api_key_enc",
  "api_key_length",
  "api_token_enc",
  "api_token_length",
  "region",
  "check_interval_seconds",
  "failure_threshold",
  "heartbeat_interval_seconds",
  "heartbeat_grace_seconds",
  "team_id",
  "configuration",
  "organization_id",
  "user_id",
];

/**
 * Writes the changed columns at `at`. With `recheck` (a new address or credential) the probe
 * checks it from a clean slate: due at `at`, failure and success runs reset.
 */
export async function updateConnectionRow(
  tx: Queryable,
  id: string,
  changes: ConnectionChanges,
  at: Date,
  opts: { recheck: boolean },
): Promise<void> {
  const { params, param } = binder([id]);
  const sets: string[] = [];
  for (const col of CHANGEABLE) if (changes[col] !== undefined) sets.push(`${col} = ${param(changes[col])}`);
  const when = param(at.toISOString());
  if (opts.recheck)
    sets.push(`next_check_at = ${when}`, "consecutive_failures = 0", "consecutive_successes = 0");
  sets.push(`updated_at = ${when}`);
  await tx.query(`UPDATE connections SET ${sets.join(", ")} WHERE id = $1`, params);
}

/** Removes a connection; its ingestion key goes with it through the foreign key. */
export async function deleteConnectionRow(db: Queryable, id: string): Promise<void> {
  await db.query("DELETE FROM connections WHERE id = $1", [id]);
}

/** Credentials are never returned: a fixed run of asterisks when one is stored, else null. */
const MASK = "********";
const masked = (len: number) => (len > 0 ? MASK : null);

/** The spec's connection record (GET /v1/connections/{id}); credentials masked. */
export interface Connection {
  id: string;
  service_type: string;
  service_name: string;
  status: string;
  base_url: string | null;
  api_key: string | null;
  organization_id: string | null;
  created_at: string;
}

/** The list's record: every field, its organization, and the stored credentials' lengths. */
export interface ListedConnection extends Connection {
  api_token: string | null;
  region: string | null;
  team_id: string | null;
  organizations: { id: string; name: string } | null;
  configuration: unknown;
  _credential_lengths: { api_key: number; api_token: number };
  check_interval_seconds: number | null;
  failure_threshold: number | null;
  heartbeat_interval_seconds: number | null;
  heartbeat_grace_seconds: number | null;
  last_sync_at: string | null;
}

/** The single-connection shape of the spec (GET /v1/connections/{id}). */
export function toConnection(r: ConnectionRow): Connection {
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
export function toListedConnection(r: ConnectionRow): ListedConnection {
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

/** Stored ciphertexts, for re-encryption under a new master secret (`vigil admin reencrypt`). */
export interface StoredCredentials extends Record<string, unknown> {
  id: string;
  api_key_enc: string | null;
  api_token_enc: string | null;
}

/** Every connection that stores a credential, with its ciphertexts. */
export async function connectionsWithCredentials(db: Queryable): Promise<StoredCredentials[]> {
  const r = await db.query<StoredCredentials>(
    "SELECT id, api_key_enc, api_token_enc FROM connections WHERE api_key_enc IS NOT NULL OR api_token_enc IS NOT NULL",
  );
  return r.rows;
}

/** Replaces a connection's ciphertexts (same plaintexts, new key). */
export async function replaceCiphertexts(db: Queryable, c: StoredCredentials): Promise<void> {
  await db.query("UPDATE connections SET api_key_enc = $2, api_token_enc = $3 WHERE id = $1", [
    c.id,
    c.api_key_enc,
    c.api_token_enc,
  ]);
}

// The status statements. Only the state machine in status.ts calls them: it is the one writer
// of `connections.status`, and these are its storage.

/** The connection's status, locked for the rest of the transaction; undefined when it is gone. */
export async function lockStatus(tx: Queryable, id: string): Promise<ConnectionStatus | undefined> {
  const r = await tx.query<{ status: ConnectionStatus }>(
    "SELECT status FROM connections WHERE id = $1 FOR UPDATE",
    [id],
  );
  return r.rows[0]?.status;
}

export async function writeStatus(
  tx: Queryable,
  id: string,
  status: ConnectionStatus,
  at: Date,
): Promise<void> {
  await tx.query("UPDATE connections SET status = $2, updated_at = $3 WHERE id = $1", [
    id,
    status,
    at.toISOString(),
  ]);
}

/** When a gateway was last heard from, and the status a heartbeat moves it to, in one statement. */
export async function writeHeartbeatSeen(
  db: Queryable,
  id: string,
  status: ConnectionStatus,
  at: Date,
): Promise<void> {
  await db.query(
    `UPDATE connections SET last_heartbeat_at = $2, status = $3,
            updated_at = CASE WHEN status <> $3 THEN $2 ELSE updated_at END
      WHERE id = $1`,
    [id, at.toISOString(), status],
  );
}
