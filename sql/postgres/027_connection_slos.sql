-- Service level objectives per connection (issue #33; docs/api.md: SLOs). One per connection:
-- the share of checks that must succeed over a rolling window of whole UTC days.
CREATE TABLE connection_slos (
  connection_id text PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
  objective double precision NOT NULL CHECK (objective >= 0.9 AND objective <= 0.99999),
  window_days integer NOT NULL CHECK (window_days IN (28, 30, 90)),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
