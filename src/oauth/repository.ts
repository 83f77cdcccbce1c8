import type { Queryable } from "../stores/relational/types.js";

/** Every statement on the OAuth and session tables (sql/postgres/011_oauth.sql). */

export interface ClientRow extends Record<string, unknown> {
  id: string;
  name: string | null;
  redirect_uris: string[];
  created_at: Date;
}

export async function insertClient(
  db: Queryable,
  c: { id: string; name: string | null; redirectUris: string[]; at: Date },
): Promise<void> {
  await db.query(
    "INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES ($1, $2, $3::jsonb, $4)",
    [c.id, c.name, JSON.stringify(c.redirectUris), c.at],
  );
}

export async function clientById(db: Queryable, id: string): Promise<ClientRow | undefined> {
  const r = await db.query<ClientRow>(
    "SELECT id, name, redirect_uris, created_at FROM oauth_clients WHERE id = $1",
    [id],
  );
  const row = r.rows[0];
  if (row && typeof row.redirect_uris === "string")
    row.redirect_uris = JSON.parse(row.redirect_uris) as string[];
  return row;
}

export async function touchClient(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(
    "UPDATE oauth_clients SET first_used_at = coalesce(first_used_at, $2), last_used_at = $2 WHERE id = $1",
    [id, at],
  );
}

/** Registrations never approved by anyone within a day, and clients unused for `idleDays`. */
export async function deleteStaleClients(db: Queryable, at: Date, idleDays: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM oauth_clients
      WHERE (first_used_at IS NULL AND created_at < $1::timestamptz - interval '1 day')
         OR (last_used_at < $1::timestamptz - make_interval(days => $2::int))`,
    [at, idleDays],
  );
  return r.rowCount;
}

export async function insertCode(
  db: Queryable,
  c: {
    hash: string;
    clientId: string;
    userId: string;
    redirectUri: string;
    challenge: string;
    resource: string;
    scope: string;
    expiresAt: Date;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, resource, scope, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [c.hash, c.clientId, c.userId, c.redirectUri, c.challenge, c.resource, c.scope, c.expiresAt],
  );
}

export interface CodeRow extends Record<string, unknown> {
  client_id: string;
  user_id: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
  scope: string;
  expires_at: Date;
  used_at: Date | null;
  grant_id: string | null;
}

/** Locks the code's row for the exchange (two concurrent exchanges: one wins, one sees it used). */
export async function codeForUpdate(db: Queryable, hash: string): Promise<CodeRow | undefined> {
  const r = await db.query<CodeRow>(
    `SELECT client_id, user_id, redirect_uri, code_challenge, resource, scope, expires_at, used_at, grant_id
       FROM oauth_codes WHERE code_hash = $1 FOR UPDATE`,
    [hash],
  );
  return r.rows[0];
}

export async function markCodeUsed(
  db: Queryable,
  hash: string,
  grantId: string | null,
  at: Date,
): Promise<void> {
  await db.query("UPDATE oauth_codes SET used_at = $2, grant_id = $3 WHERE code_hash = $1", [
    hash,
    at,
    grantId,
  ]);
}

export async function deleteExpiredCodes(db: Queryable, at: Date): Promise<number> {
  return (
    await db.query("DELETE FROM oauth_codes WHERE expires_at < $1::timestamptz - interval '1 day'", [at])
  ).rowCount;
}

export async function insertGrant(
  db: Queryable,
  g: { id: string; clientId: string; userId: string; resource: string; scope: string; at: Date },
): Promise<void> {
  await db.query(
    "INSERT INTO oauth_grants (id, client_id, user_id, resource, scope, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    [g.id, g.clientId, g.userId, g.resource, g.scope, g.at],
  );
}

export interface GrantRow extends Record<string, unknown> {
  id: string;
  client_id: string;
  user_id: string;
  resource: string;
  scope: string;
  revoked_at: Date | null;
}

export async function grantById(db: Queryable, id: string): Promise<GrantRow | undefined> {
  const r = await db.query<GrantRow>(
    "SELECT id, client_id, user_id, resource, scope, revoked_at FROM oauth_grants WHERE id = $1",
    [id],
  );
  return r.rows[0];
}

export async function revokeGrant(db: Queryable, id: string, at: Date, reason: string): Promise<void> {
  await db.query(
    "UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3 WHERE id = $1 AND revoked_at IS NULL",
    [id, at, reason],
  );
}

/** Every live grant of a user, revoked; returns their ids. */
export async function revokeUserGrants(db: Queryable, userId: string, at: Date): Promise<string[]> {
  const r = await db.query<{ id: string }>(
    `UPDATE oauth_grants SET revoked_at = $2, revoked_reason = 'access revoked by an administrator'
      WHERE user_id = $1 AND revoked_at IS NULL RETURNING id`,
    [userId, at],
  );
  return r.rows.map((x) => x.id);
}

export async function insertRefreshToken(
  db: Queryable,
  t: { hash: string; grantId: string; at: Date; expiresAt: Date },
): Promise<void> {
  await db.query(
    "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
    [t.hash, t.grantId, t.at, t.expiresAt],
  );
}

export interface RefreshRow extends Record<string, unknown> {
  grant_id: string;
  expires_at: Date;
  used_at: Date | null;
}

export async function refreshTokenForUpdate(db: Queryable, hash: string): Promise<RefreshRow | undefined> {
  const r = await db.query<RefreshRow>(
    "SELECT grant_id, expires_at, used_at FROM oauth_refresh_tokens WHERE token_hash = $1 FOR UPDATE",
    [hash],
  );
  return r.rows[0];
}

export async function markRefreshUsed(db: Queryable, hash: string, at: Date): Promise<void> {
  await db.query("UPDATE oauth_refresh_tokens SET used_at = $2 WHERE token_hash = $1", [hash, at]);
}

export async function deleteExpiredRefreshTokens(db: Queryable, at: Date): Promise<number> {
  return (await db.query("DELETE FROM oauth_refresh_tokens WHERE expires_at < $1", [at])).rowCount;
}

export async function insertSession(
  db: Queryable,
  s: { hash: string; userId: string; at: Date; expiresAt: Date },
): Promise<void> {
  await db.query(
    "INSERT INTO web_sessions (id_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
    [s.hash, s.userId, s.at, s.expiresAt],
  );
}

export async function sessionUser(
  db: Queryable,
  hash: string,
  at: Date,
): Promise<{ user_id: string; email: string } | undefined> {
  const r = await db.query<{ user_id: string; email: string }>(
    `SELECT s.user_id, u.email FROM web_sessions s JOIN users u ON u.id = s.user_id
      WHERE s.id_hash = $1 AND s.expires_at > $2`,
    [hash, at],
  );
  return r.rows[0];
}

export async function deleteSession(db: Queryable, hash: string): Promise<void> {
  await db.query("DELETE FROM web_sessions WHERE id_hash = $1", [hash]);
}

export async function deleteUserSessions(db: Queryable, userId: string): Promise<number> {
  return (await db.query("DELETE FROM web_sessions WHERE user_id = $1", [userId])).rowCount;
}

export async function deleteExpiredSessions(db: Queryable, at: Date): Promise<number> {
  return (await db.query("DELETE FROM web_sessions WHERE expires_at < $1", [at])).rowCount;
}

export async function userForSignIn(
  db: Queryable,
  email: string,
): Promise<{ id: string; email: string; password_hash: string | null } | undefined> {
  const r = await db.query<{ id: string; email: string; password_hash: string | null }>(
    "SELECT id, email, password_hash FROM users WHERE lower(email) = lower($1)",
    [email],
  );
  return r.rows[0];
}

export async function userExistsById(db: Queryable, id: string): Promise<boolean> {
  return (await db.query("SELECT 1 FROM users WHERE id = $1", [id])).rowCount > 0;
}

/** Failures counted for `key` within the window that started at most `windowMs` ago. */
export async function throttleCount(db: Queryable, key: string, at: Date, windowMs: number): Promise<number> {
  const r = await db.query<{ count: number }>(
    "SELECT count FROM auth_throttle WHERE key = $1 AND window_start > $2",
    [key, new Date(at.getTime() - windowMs)],
  );
  return r.rows[0]?.count ?? 0;
}

/** Counts one more for `key`, starting a new window when the last one is over. */
export async function throttleHit(db: Queryable, key: string, at: Date, windowMs: number): Promise<number> {
  const r = await db.query<{ count: number }>(
    `INSERT INTO auth_throttle (key, count, window_start) VALUES ($1, 1, $2)
     ON CONFLICT (key) DO UPDATE SET
       count = CASE WHEN auth_throttle.window_start > $3 THEN auth_throttle.count + 1 ELSE 1 END,
       window_start = CASE WHEN auth_throttle.window_start > $3 THEN auth_throttle.window_start ELSE $2 END
     RETURNING count`,
    [key, at, new Date(at.getTime() - windowMs)],
  );
  return r.rows[0]?.count ?? 1;
}

export async function throttleClear(db: Queryable, key: string): Promise<void> {
  await db.query("DELETE FROM auth_throttle WHERE key = $1", [key]);
}

export async function deleteOldThrottles(db: Queryable, before: Date): Promise<number> {
  return (await db.query("DELETE FROM auth_throttle WHERE window_start < $1", [before])).rowCount;
}
