-- Invitations to an organization (issue #15, point 1): an admin or owner invites an e-mail
-- address with a role; the invitee gets a single-use link valid for 7 days, by e-mail through
-- the notifications outbox (kind `invitation`).
--
-- The link's token is never stored: only its SHA-256 (`token_hash`). It is made when the e-mail
-- is sent (src/notifications/delivery.ts asks src/identity/invitations.ts for the e-mail's text),
-- so neither the outbox row (which the alert history shows) nor this table holds it, in
-- plaintext or encrypted. NULL until the e-mail went out; a resend makes a new token and only
-- the newest link works.
CREATE TABLE invitations (
  id text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('member', 'admin', 'owner')),
  token_hash text UNIQUE,
  invited_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz,
  accepted_by text REFERENCES users (id) ON DELETE SET NULL,
  revoked_at timestamptz,
  -- The outbox row of its e-mail (one recipient, no webhook).
  notification_id text REFERENCES notifications (id) ON DELETE SET NULL
);
CREATE INDEX invitations_org ON invitations (organization_id, created_at DESC);
CREATE INDEX invitations_notification ON invitations (notification_id);

ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check
  CHECK (kind IN ('failure', 'recovery', 'audit', 'budget_warning', 'anomaly', 'invitation'));
