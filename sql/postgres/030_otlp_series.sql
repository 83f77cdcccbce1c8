-- OTLP ingest (issue #35; docs/otlp.md).
--
-- otlp_series: per gateway instance, the last point Vigil took of each of its cumulative series,
-- so the next point becomes an increment (value minus this one) whichever process or worker
-- receives it, and after a restart. `state` is JSON: series key -> [start_ns, time_ns, value,
-- count, prev_start_ns, prev_time_ns, prev_value, prev_count] (the point before is kept so a
-- resend of the latest point gives the same increment again, and the same rows: stored once).
-- `version` grows with every change: a process holds the state in memory and writes it back only
-- if nobody changed it since it read it (compare and set), so one export costs one statement.
CREATE TABLE otlp_series (
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  instance text NOT NULL,
  version bigint NOT NULL,
  state text NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (connection_id, instance)
);

-- Connections that export GenAI token metrics (the latest such export): from then on the token
-- attributes of their spans are not counted a second time.
CREATE TABLE otlp_token_metrics (
  connection_id text PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
  last_at timestamptz NOT NULL
);
