-- Maintenance windows (issue #31, point 4; docs/maintenance.md).

-- A window belongs to one account, like a webhook: a personal one (user_id) or an organization's
-- (organization_id), never both. It covers either the connections listed in
-- maintenance_window_connections or, when covers_organization is true, every connection of its
-- organization (those added later too).
--
-- One-off: starts_at and ends_at as given; rrule, duration_minutes and timezone are NULL.
-- Recurring: rrule is one RRULE line evaluated in `timezone` from dtstart (a wall-clock time in
-- that zone); every occurrence lasts duration_minutes. starts_at is then the first occurrence's
-- start and ends_at the last one's end, NULL while the schedule has no end: the pair bounds every
-- occurrence, so a lookup skips windows that cannot cover an instant without expanding the rule.
CREATE TABLE maintenance_windows (
  id text PRIMARY KEY,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  covers_organization boolean NOT NULL DEFAULT false,
  starts_at timestamptz NOT NULL,
  ends_at timestamptz,
  rrule text,
  -- the wall-clock start the rule counts from, `YYYY-MM-DDTHH:MM:SS` in timezone
  dtstart text,
  duration_minutes integer CHECK (duration_minutes BETWEEN 1 AND 10080),
  timezone text,
  -- the user who created it
  created_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  CONSTRAINT maintenance_windows_one_account CHECK ((user_id IS NULL) <> (organization_id IS NULL)),
  CONSTRAINT maintenance_windows_org_scope CHECK (NOT covers_organization OR organization_id IS NOT NULL),
  CONSTRAINT maintenance_windows_kind CHECK (
    (rrule IS NULL AND dtstart IS NULL AND duration_minutes IS NULL AND timezone IS NULL AND ends_at IS NOT NULL)
    OR (rrule IS NOT NULL AND dtstart IS NOT NULL AND duration_minutes IS NOT NULL AND timezone IS NOT NULL)
  ),
  CONSTRAINT maintenance_windows_order CHECK (ends_at IS NULL OR ends_at > starts_at)
);
CREATE INDEX maintenance_windows_user ON maintenance_windows (user_id, created_at) WHERE user_id IS NOT NULL;
CREATE INDEX maintenance_windows_organization ON maintenance_windows (organization_id, created_at)
  WHERE organization_id IS NOT NULL;
CREATE INDEX maintenance_windows_covers ON maintenance_windows (organization_id) WHERE covers_organization;

CREATE TABLE maintenance_window_connections (
  window_id text NOT NULL REFERENCES maintenance_windows (id) ON DELETE CASCADE,
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  PRIMARY KEY (window_id, connection_id)
);
CREATE INDEX maintenance_window_connections_conn ON maintenance_window_connections (connection_id);

-- Samples taken while their connection was under maintenance (`sql` series backend): kept and
-- read back, but left out of uptime; the rollups count them apart in `maintenance`. NULL (rows
-- written before, or by a writer that does not set it) reads as false and 0, as QuestDB reads
-- its own rows from before the column.
ALTER TABLE availability_samples ADD COLUMN maintenance boolean;
ALTER TABLE availability_daily ADD COLUMN maintenance bigint;
ALTER TABLE availability_monthly ADD COLUMN maintenance bigint;
ALTER TABLE availability_partial ADD COLUMN maintenance bigint;
