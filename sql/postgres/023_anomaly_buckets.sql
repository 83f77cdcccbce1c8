-- The anomaly detector's 5-minute aggregates for the `sql` series backend (src/anomalies/buckets.ts);
-- the retention job removes rows older than nine days.
CREATE TABLE anomaly_buckets (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  metric text NOT NULL,
  bin bigint NOT NULL,
  n bigint NOT NULL,
  total double precision NOT NULL,
  PRIMARY KEY (ts, connection_id, metric, bin)
);

-- How far the detector has judged (the end of the last one-minute evaluation step it judged for
-- every connection) and how far the 5-minute buckets are rolled up. One row.
CREATE TABLE anomaly_detector_progress (
  id integer PRIMARY KEY CHECK (id = 1),
  judged_through timestamptz,
  rolled_through timestamptz
);

-- Minutes of a connection that received rows late (a buffered heartbeat, a synced execution that
-- finished, gap-fill): the detector rolls their buckets up again and judges again the evaluation
-- steps whose windows hold them (src/anomalies/late.ts).
CREATE TABLE anomaly_late_minutes (
  connection_id text NOT NULL,
  minute timestamptz NOT NULL,
  marked_at timestamptz NOT NULL,
  -- its bucket was rolled up again since it was marked; the mark waits to be judged again
  rerolled boolean NOT NULL DEFAULT false,
  PRIMARY KEY (connection_id, minute)
);

-- At most one open anomaly per connection and metric, whatever happens to the detector's lock.
CREATE UNIQUE INDEX anomalies_one_open ON anomalies (connection_id, metric) WHERE status = 'open';

-- The hourly detector's streaks counted hours; the detector now counts one-minute evaluations.
-- Open anomalies stay open and resolve once their metric is back inside its band.
UPDATE anomaly_detector_state SET over_streak = 0, under_streak = 0, streak_started_at = NULL;
