-- Public status pages (issue #34; docs/status-pages.md). A page belongs to one account, like a
-- maintenance window: a personal one (user_id) or an organization's (organization_id), never both.
-- Visitors read it without an account at /status/{slug} (or on its custom domain), so nothing in
-- these tables that a visitor sees may come from a connection but through a component's
-- display name and public key.
CREATE TABLE status_pages (
  id text PRIMARY KEY,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  -- lowercase letters, digits and inner hyphens; unique across the whole service
  slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$'),
  title text NOT NULL,
  description text,
  show_response_times boolean NOT NULL DEFAULT false,
  -- a host name the page also answers on (Host header), lowercase; unique
  custom_domain text UNIQUE,
  logo bytea,
  logo_type text,
  -- sha256 of the logo, hex, its first 16 characters: the cache-busting `v` of its URL
  logo_hash text,
  created_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  -- moves on every change of the page, its components or its posts: the public cache compares it
  updated_at timestamptz NOT NULL,
  CONSTRAINT status_pages_one_account CHECK ((user_id IS NULL) <> (organization_id IS NULL)),
  CONSTRAINT status_pages_logo CHECK ((logo IS NULL) = (logo_type IS NULL) AND (logo IS NULL) = (logo_hash IS NULL))
);
CREATE INDEX status_pages_user ON status_pages (user_id, created_at) WHERE user_id IS NOT NULL;
CREATE INDEX status_pages_organization ON status_pages (organization_id, created_at)
  WHERE organization_id IS NOT NULL;

-- The page's components, in groups: group_position orders the groups, position the components
-- within one. `key` is the component's public id (badge URLs); it stays the same while the
-- connection stays on the page, whatever else changes.
CREATE TABLE status_page_components (
  page_id text NOT NULL REFERENCES status_pages (id) ON DELETE CASCADE,
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  key text NOT NULL CHECK (key ~ '^[a-z0-9]{12}$'),
  group_position integer NOT NULL,
  group_name text NOT NULL,
  position integer NOT NULL,
  display_name text NOT NULL,
  PRIMARY KEY (page_id, connection_id),
  UNIQUE (page_id, key)
);
CREATE INDEX status_page_components_conn ON status_page_components (connection_id);

-- Public incident posts: written by members, separate from the internal incidents and their
-- timeline. `status` is the latest update's.
CREATE TABLE status_page_posts (
  id text PRIMARY KEY,
  page_id text NOT NULL REFERENCES status_pages (id) ON DELETE CASCADE,
  title text NOT NULL,
  status text NOT NULL CHECK (status IN ('investigating', 'identified', 'monitoring', 'resolved')),
  created_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  resolved_at timestamptz
);
CREATE INDEX status_page_posts_page ON status_page_posts (page_id, created_at DESC);

CREATE TABLE status_page_post_updates (
  id text PRIMARY KEY,
  post_id text NOT NULL REFERENCES status_page_posts (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('investigating', 'identified', 'monitoring', 'resolved')),
  message text NOT NULL,
  created_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX status_page_post_updates_post ON status_page_post_updates (post_id, created_at);
