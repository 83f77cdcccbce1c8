-- Availability rollups for the `sql` backend (README: Retention). Kept after the raw samples
-- expire: daily rows at least 400 days, monthly rows at least 5 years; the retention job deletes
-- older ones.

CREATE TABLE availability_daily (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  checks bigint NOT NULL,
  available bigint NOT NULL,
  response_ms_sum double precision NOT NULL,
  response_ms_count bigint NOT NULL,
  PRIMARY KEY (ts, connection_id)
);
CREATE INDEX availability_daily_conn_ts ON availability_daily (connection_id, ts DESC);

CREATE TABLE availability_monthly (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  checks bigint NOT NULL,
  available bigint NOT NULL,
  response_ms_sum double precision NOT NULL,
  response_ms_count bigint NOT NULL,
  PRIMARY KEY (ts, connection_id)
);
CREATE INDEX availability_monthly_conn_ts ON availability_monthly (connection_id, ts DESC);

-- Which days the availability rollup can be trusted for (src/retention/rollups.ts): every day
-- before the one holding rolled_through was rolled up after it ended, except days marked dirty
-- by a late sample (gap-fill, a late heartbeat) that the next rollup run has not yet redone.
CREATE TABLE rollup_state (
  id integer PRIMARY KEY CHECK (id = 1),
  rolled_through timestamptz NOT NULL
);

CREATE TABLE rollup_dirty (
  day timestamptz PRIMARY KEY,
  marked_at timestamptz NOT NULL
);
