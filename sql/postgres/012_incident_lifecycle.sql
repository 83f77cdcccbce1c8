-- Incident lifecycle, alert history and noise control (issue #14, points 3, 4 and 6).

-- The timeline records every notification attempt and its outcome, and notifications that noise
-- control withheld: `delivered`, `delivery_failed` (to be retried), `delivery_given_up` and
-- `suppressed` join `opened`, `acknowledged`, `resolved` and `notified` (README: Incidents:
-- lifecycle and timeline).
ALTER TABLE incident_events DROP CONSTRAINT incident_events_kind_check;
ALTER TABLE incident_events ADD CONSTRAINT incident_events_kind_check CHECK (kind IN (
  'opened', 'acknowledged', 'resolved', 'notified',
  'delivered', 'delivery_failed', 'delivery_given_up', 'suppressed'
));

-- The alert history is the notifications outbox: one row per notification and recipient.
ALTER TABLE notifications
  -- How it goes out: e-mail today, outbound webhooks later (the recipient is then the URL).
  ADD COLUMN channel text NOT NULL DEFAULT 'email' CHECK (channel IN ('email', 'webhook')),
  -- The anomaly it reports, for alerts of the anomaly detector.
  ADD COLUMN anomaly_id text REFERENCES anomalies (id) ON DELETE SET NULL,
  -- The account it belongs to (a personal account: user_id; an organization: organization_id),
  -- which decides who may read it: an audit names no connection, and a deleted connection's
  -- alerts stay readable. NULL on both: the connection's account (rows written before this).
  ADD COLUMN user_id text REFERENCES users (id) ON DELETE CASCADE,
  ADD COLUMN organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  -- For kind `audit`: what happened (api_key_created, api_key_revoked,
  -- connection_credentials_changed, connection_deleted, membership_changed).
  ADD COLUMN audit_event text,
  -- When it was first due: later than created_at when noise control deferred a failure e-mail
  -- (at most one per connection every ALERT_FAILURE_MAIL_INTERVAL_SECONDS). NULL: created_at.
  ADD COLUMN due_at timestamptz;
-- `suppressed`: withheld by noise control before its first attempt (its incident resolved or
-- was acknowledged while it waited); never sent.
ALTER TABLE notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_status_check
  CHECK (status IN ('pending', 'sent', 'failed', 'suppressed'));
UPDATE notifications n
   SET user_id = CASE WHEN c.organization_id IS NULL THEN c.user_id END,
       organization_id = c.organization_id
  FROM connections c
 WHERE c.id = n.connection_id;
-- GET /v1/alerts pages newest first; noise control looks up a connection's last failure e-mail.
CREATE INDEX notifications_created ON notifications (created_at DESC, id DESC);
CREATE INDEX notifications_conn_kind ON notifications (connection_id, kind, created_at DESC);
CREATE INDEX notifications_incident ON notifications (incident_id);

-- The newest heartbeat seen from a gateway (its time and id): a heartbeat that is not newer is a
-- resend, which never counts as a check nor as the daemon being back (src/probes/heartbeats.ts).
ALTER TABLE connections
  ADD COLUMN heartbeat_newest_at timestamptz,
  ADD COLUMN heartbeat_newest_id text;
