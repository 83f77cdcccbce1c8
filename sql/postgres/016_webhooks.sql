-- Outbound webhooks (issue #14, point 5; docs/webhooks.md).

-- A webhook belongs to one account: a personal one (user_id) or an organization's
-- (organization_id), never both. Its URL and its signing secret are credentials (a chat tool's
-- incoming-webhook URL lets anyone post to the channel): both are stored encrypted with the
-- credential box (src/lib/credentials.ts, rewritten by `vigil admin reencrypt`). Only the URL's
-- origin and a short hint are kept in the clear, to name the webhook in lists and the alert history.
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  user_id text REFERENCES users (id) ON DELETE CASCADE,
  organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
  url_enc text NOT NULL,
  -- `https://hooks.example.com`: the alert history's recipient
  url_origin text NOT NULL,
  -- the origin and the URL's last characters, e.g. `https://hooks.example.com/…x7Qa`
  url_hint text NOT NULL,
  secret_enc text NOT NULL,
  created_at timestamptz NOT NULL,
  CONSTRAINT webhooks_one_account CHECK ((user_id IS NULL) <> (organization_id IS NULL))
);
CREATE INDEX webhooks_user ON webhooks (user_id, created_at) WHERE user_id IS NOT NULL;
CREATE INDEX webhooks_organization ON webhooks (organization_id, created_at) WHERE organization_id IS NOT NULL;

-- A `webhook` notification names its webhook (the recipient is then the URL's origin). NULL for
-- e-mails, and once the webhook was deleted (its undelivered notifications were given up then).
ALTER TABLE notifications ADD COLUMN webhook_id text REFERENCES webhooks (id) ON DELETE SET NULL;
CREATE INDEX notifications_webhook ON notifications (webhook_id) WHERE webhook_id IS NOT NULL;
-- The delivery jobs claim due rows of their channel.
CREATE INDEX notifications_pending_channel ON notifications (channel, next_attempt_at) WHERE status = 'pending';
