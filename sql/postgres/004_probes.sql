-- Probe scheduling and availability incidents.

ALTER TABLE connections
  -- Per-connection overrides; NULL means the plan's default (see src/probes/schedule.ts).
  ADD COLUMN check_interval_seconds integer CHECK (check_interval_seconds > 0),
  ADD COLUMN failure_threshold integer CHECK (failure_threshold BETWEEN 1 AND 100),
  ADD COLUMN next_check_at timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN last_check_at timestamptz,
  ADD COLUMN last_sync_at timestamptz,
  ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
  ADD COLUMN consecutive_successes integer NOT NULL DEFAULT 0,
  -- A probe worker's claim: the connection is its own until lease_until.
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_until timestamptz;
CREATE INDEX connections_due ON connections (next_check_at) WHERE service_type <> 'gateway';

CREATE TABLE incidents (
  id text PRIMARY KEY,
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('availability', 'missed_heartbeat', 'anomaly', 'budget')),
  status text NOT NULL CHECK (status IN ('open', 'acknowledged', 'resolved')),
  title text NOT NULL,
  opened_at timestamptz NOT NULL,
  acknowledged_at timestamptz,
  resolved_at timestamptz
);
-- Never two unresolved incidents of one kind for one connection.
CREATE UNIQUE INDEX incidents_one_unresolved ON incidents (connection_id, kind) WHERE status <> 'resolved';
CREATE INDEX incidents_conn_opened ON incidents (connection_id, opened_at DESC);

-- Append-only timeline of each incident.
CREATE TABLE incident_events (
  id text PRIMARY KEY,
  incident_id text NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
  at timestamptz NOT NULL,
  kind text NOT NULL CHECK (kind IN ('opened', 'acknowledged', 'resolved', 'notified')),
  detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX incident_events_incident ON incident_events (incident_id, at);

-- Outbox of e-mails: written in the transaction that decides them, sent by a background job.
CREATE TABLE notifications (
  id text PRIMARY KEY,
  connection_id text REFERENCES connections (id) ON DELETE SET NULL,
  incident_id text REFERENCES incidents (id) ON DELETE SET NULL,
  kind text NOT NULL CHECK (kind IN ('failure', 'recovery', 'audit', 'budget_warning', 'anomaly')),
  recipient text NOT NULL,
  subject text NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  sent_at timestamptz,
  last_error text
);
CREATE INDEX notifications_pending ON notifications (next_attempt_at) WHERE status = 'pending';
