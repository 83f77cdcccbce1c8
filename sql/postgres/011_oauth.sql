-- OAuth 2.1 for the MCP tool server (#13), and the sign-in session the dashboard shares.
-- Every secret here (codes, refresh tokens, session ids) is stored as a SHA-256 hash: they are
-- 256-bit random values, so a fast hash suffices, and a database leak reveals none of them.

-- Dynamically registered clients (RFC 7591). Public clients only: no secret.
CREATE TABLE oauth_clients (
  id text PRIMARY KEY,
  name text,
  redirect_uris jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  -- Set when a user first approves the client; a registration never used expires after a day.
  first_used_at timestamptz,
  last_used_at timestamptz
);

-- One approval of one client by one user for one resource; every token belongs to a grant, and
-- revoking the grant stops them all.
CREATE TABLE oauth_grants (
  id text PRIMARY KEY,
  client_id text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  resource text NOT NULL,
  scope text NOT NULL,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz,
  revoked_reason text
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id) WHERE revoked_at IS NULL;

-- Authorization codes: single use, a minute long, bound to client, redirect URI, PKCE challenge
-- and resource. `grant_id` is set when it is exchanged (a replay revokes that grant).
CREATE TABLE oauth_codes (
  code_hash text PRIMARY KEY,
  client_id text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  redirect_uri text NOT NULL,
  code_challenge text NOT NULL,
  resource text NOT NULL,
  scope text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  grant_id text
);

-- Refresh tokens, rotated on every use: a used one presented again revokes its grant.
CREATE TABLE oauth_refresh_tokens (
  token_hash text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- Signed-in browser sessions (OAuth sign-in now, the dashboard later).
CREATE TABLE web_sessions (
  id_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions (user_id);

-- Failed sign-ins and registrations, counted per key (an account, an address) and window.
CREATE TABLE auth_throttle (
  key text PRIMARY KEY,
  count integer NOT NULL,
  window_start timestamptz NOT NULL
);
