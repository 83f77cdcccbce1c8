-- Statistical detections against 7-day baselines (the detector is a later piece of work).
CREATE TABLE anomalies (
  id text PRIMARY KEY,
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  -- response_time, failure_rate or token_spend
  metric text NOT NULL CHECK (metric IN ('response_time', 'failure_rate', 'token_spend')),
  status text NOT NULL CHECK (status IN ('open', 'resolved')),
  detected_at timestamptz NOT NULL,
  resolved_at timestamptz,
  window_start timestamptz NOT NULL,
  window_end timestamptz NOT NULL,
  observed double precision NOT NULL,
  baseline_mean double precision NOT NULL,
  baseline_stddev double precision NOT NULL,
  z_score double precision NOT NULL
);
CREATE INDEX anomalies_conn_detected ON anomalies (connection_id, detected_at DESC);
