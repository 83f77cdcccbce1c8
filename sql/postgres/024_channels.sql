-- Notification channels, routing rules and escalation (issue #31; docs/channels.md).

-- A channel belongs to one account: a personal one (user_id) or an organization's
-- (organization_id), never both, as webhooks do. `settings` holds what is not secret (a chat id, a
-- priority, an API base address, e-mail addresses); `secrets_enc` the secret fields (tokens,
-- routing keys, webhook URLs: a chat tool's incoming-webhook URL lets anyone post to it) as one
-- JSON object encrypted with the credential box (src/lib/credentials.ts, rewritten by
-- `vigil admin reencrypt`). A `webhook` channel also has its own signing secret.
CREATE TABLE channels (
  id text PRIMARY KEY,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (type IN ('email', 'webhook', 'slack', 'teams', 'discord', 'pagerduty', 'opsgenie', 'telegram', 'ntfy')),
  name text NOT NULL,
  settings jsonb NOT NULL DEFAULT '{}',
  secrets_enc text,
  -- names the channel without its secret in lists and the alert history: `hooks.slack.com/…x7Qa`
  hint text NOT NULL,
  signing_secret_enc text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- A delivery run's lease on the channel: one node at a time sends a channel's alerts, in the
  -- order they became due (a trigger never overtakes its resolve). Expires if the node dies.
  delivering_until timestamptz,
  CONSTRAINT channels_one_account CHECK ((user_id IS NULL) <> (organization_id IS NULL))
);
CREATE INDEX channels_user ON channels (user_id, created_at) WHERE user_id IS NOT NULL;
CREATE INDEX channels_organization ON channels (organization_id, created_at) WHERE organization_id IS NOT NULL;

-- Routing rules of an account: which channels an alert goes to. Once an account has a rule, an
-- alert no rule matches goes to e-mail only. NULL kinds or connection_ids: all.
CREATE TABLE routing_rules (
  id text PRIMARY KEY,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  channel_ids jsonb NOT NULL,
  kinds jsonb,
  connection_ids jsonb,
  send_recoveries boolean NOT NULL DEFAULT true,
  escalate_after_minutes integer CHECK (escalate_after_minutes BETWEEN 1 AND 1440),
  repeat_every_minutes integer CHECK (repeat_every_minutes BETWEEN 1 AND 1440),
  escalation_channel_ids jsonb NOT NULL DEFAULT '[]',
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT routing_rules_one_account CHECK ((user_id IS NULL) <> (organization_id IS NULL))
);
CREATE INDEX routing_rules_user ON routing_rules (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX routing_rules_organization ON routing_rules (organization_id) WHERE organization_id IS NOT NULL;

-- Whether an account's owners (and an organization's admins) get every alert by e-mail: on
-- unless the account turns it off (PUT /v1/notification-settings).
ALTER TABLE users ADD COLUMN alert_email boolean NOT NULL DEFAULT true;
ALTER TABLE organizations ADD COLUMN alert_email boolean NOT NULL DEFAULT true;

-- Escalations waiting: an incident a rule with escalate_after_minutes matched, and when its next
-- step is due. The escalation job claims due rows; acknowledging or resolving the incident ends
-- them (the job finds the incident no longer open and deletes the row).
CREATE TABLE incident_escalations (
  incident_id text NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
  rule_id text NOT NULL REFERENCES routing_rules (id) ON DELETE CASCADE,
  next_at timestamptz NOT NULL,
  steps integer NOT NULL DEFAULT 0,
  PRIMARY KEY (incident_id, rule_id)
);
CREATE INDEX incident_escalations_due ON incident_escalations (next_at);

-- The outbox names the channel a row goes to (NULL: the account's owners' e-mail, or a webhook
-- of /v1/webhooks). `channel` is the channel's type; the new kinds are a paging provider's
-- acknowledgement, an escalation or reminder, and a channel's test send.
ALTER TABLE notifications ADD COLUMN channel_id text REFERENCES channels (id) ON DELETE SET NULL;
CREATE INDEX notifications_channel ON notifications (channel_id) WHERE channel_id IS NOT NULL;
-- Channel delivery looks for each channel's pending rows only: never its whole history.
CREATE INDEX notifications_channel_pending ON notifications (channel_id, next_attempt_at)
  WHERE status = 'pending' AND channel_id IS NOT NULL;
ALTER TABLE notifications DROP CONSTRAINT notifications_channel_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_channel_check
  CHECK (channel IN ('email', 'webhook', 'slack', 'teams', 'discord', 'pagerduty', 'opsgenie', 'telegram', 'ntfy'));
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check
  CHECK (kind IN ('failure', 'recovery', 'audit', 'budget_warning', 'anomaly', 'invitation', 'acknowledged', 'escalation'));
-- What a paging provider does with the row: trigger, acknowledge, resolve, or a plain message.
ALTER TABLE notifications ADD COLUMN event text;

ALTER TABLE incident_events DROP CONSTRAINT incident_events_kind_check;
ALTER TABLE incident_events ADD CONSTRAINT incident_events_kind_check CHECK (kind IN (
  'opened', 'acknowledged', 'resolved', 'notified',
  'delivered', 'delivery_failed', 'delivery_given_up', 'suppressed', 'escalated'
));
