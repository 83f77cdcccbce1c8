-- OTLP ingest (issue #35; docs/otlp.md). The last point Vigil took of each cumulative series a
-- gateway exports, so the next point becomes an increment (value minus this one) whichever
-- process or worker receives it, and after a restart. `prev_*` is the point before, so a resend of
-- the latest point gives the same increment again (and the same rows: stored once).
-- The row with series_key '' marks that the connection exports GenAI token metrics (its time is
-- the latest such export): from then on the token attributes of its spans are not counted twice.
CREATE TABLE otlp_series (
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  series_key text NOT NULL,
  start_ns bigint NOT NULL,
  time_ns bigint NOT NULL,
  value double precision NOT NULL,
  count double precision NOT NULL,
  prev_start_ns bigint,
  prev_time_ns bigint,
  prev_value double precision,
  prev_count double precision,
  PRIMARY KEY (connection_id, series_key)
);
