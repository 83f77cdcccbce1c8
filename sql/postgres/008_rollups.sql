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
