-- Accounts, organizations, API keys, connections and shared rate-limit counters.

CREATE TABLE users (
  id text PRIMARY KEY,
  email text NOT NULL,
  password_hash text,
  plan text NOT NULL CHECK (plan IN ('free', 'pro', 'scale', 'enterprise')),
  -- Custom hourly request limit (enterprise); NULL means the plan's default.
  rate_limit_per_hour integer CHECK (rate_limit_per_hour > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email ON users (lower(email));

CREATE TABLE organizations (
  id text PRIMARY KEY,
  name text NOT NULL,
  plan text NOT NULL CHECK (plan IN ('free', 'pro', 'scale', 'enterprise')),
  rate_limit_per_hour integer CHECK (rate_limit_per_hour > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('member', 'admin', 'owner')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE connections (
  id text PRIMARY KEY,
  -- The user who created it; for a personal connection, its owner.
  user_id text NOT NULL REFERENCES users (id),
  organization_id text REFERENCES organizations (id),
  service_type text NOT NULL CHECK (service_type IN ('workflow_a', 'workflow_b', 'gateway')),
  service_name text NOT NULL,
  status text NOT NULL DEFAULT 'inactive' CHECK (status IN ('active', 'inactive', 'error')),
  base_url text,
  -- Credentials: AES-256-GCM ciphertext (see src/lib/credentials.ts) and the plaintext length.
  api_key_enc text,
  api_key_length integer NOT NULL DEFAULT 0,
  api_token_enc text,
  api_token_length integer NOT NULL DEFAULT 0,
  region text,
  team_id text,
  configuration jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connections_user ON connections (user_id, created_at DESC) WHERE organization_id IS NULL;
CREATE INDEX connections_org ON connections (organization_id, created_at DESC);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('personal', 'organization', 'usage_ingestion')),
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  connection_id text REFERENCES connections (id) ON DELETE CASCADE,
  name text,
  -- The first characters of the key, to recognise it in a list; the key itself is never stored.
  display_prefix text NOT NULL,
  key_hash text NOT NULL UNIQUE,
  permissions text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz,
  CHECK ((kind = 'organization') = (organization_id IS NOT NULL)),
  CHECK ((kind = 'usage_ingestion') = (connection_id IS NOT NULL))
);
CREATE INDEX api_keys_user ON api_keys (user_id);

-- Fixed one-hour windows; each node adds its local count here about once a second.
CREATE TABLE rate_limit_windows (
  scope text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (scope, window_start)
);
