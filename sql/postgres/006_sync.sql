-- Execution sync state per connection: where the last pull stopped and which runs were still
-- open (so a later pull goes back far enough to see them finish).
ALTER TABLE connections ADD COLUMN sync_state jsonb NOT NULL DEFAULT '{}';
