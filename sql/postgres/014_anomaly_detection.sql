-- The anomaly detector (src/anomalies/detect.ts): robust baselines (median and MAD of the same
-- hour of day over the previous 7 days), the band an anomaly left, and when it started and ended.
ALTER TABLE anomalies DROP CONSTRAINT IF EXISTS anomalies_metric_check;
ALTER TABLE anomalies ADD CONSTRAINT anomalies_metric_check
  CHECK (metric IN ('response_time', 'failure_rate', 'execution_failure_rate', 'token_spend'));
-- The baseline's median, its MAD, and the band [band_low, band_high] outside which a window is
-- anomalous; `z_score` holds the robust score (observed - median) / scale of the opening window.
ALTER TABLE anomalies ADD COLUMN baseline_median double precision;
ALTER TABLE anomalies ADD COLUMN baseline_mad double precision;
ALTER TABLE anomalies ADD COLUMN band_low double precision;
ALTER TABLE anomalies ADD COLUMN band_high double precision;
-- Start of the first anomalous window of the streak that opened it; end of the last anomalous
-- window before it resolved (NULL while open).
ALTER TABLE anomalies ADD COLUMN started_at timestamptz;
ALTER TABLE anomalies ADD COLUMN ended_at timestamptz;
-- The `anomaly` incident of its connection that it opened or joined.
ALTER TABLE anomalies ADD COLUMN incident_id text;
CREATE INDEX anomalies_open ON anomalies (connection_id) WHERE status = 'open';

-- The detector's memory per connection and metric: the last window it judged, how many
-- consecutive windows were outside the band (`over`) or, while an anomaly is open, back inside
-- it (`under`), and the open anomaly. Hysteresis: an anomaly opens after N windows out, and
-- resolves after N windows back in.
CREATE TABLE anomaly_detector_state (
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  metric text NOT NULL,
  last_window timestamptz NOT NULL,
  over_streak integer NOT NULL DEFAULT 0,
  under_streak integer NOT NULL DEFAULT 0,
  -- Start of the first window of the current run outside the band.
  streak_started_at timestamptz,
  anomaly_id text REFERENCES anomalies (id) ON DELETE SET NULL,
  PRIMARY KEY (connection_id, metric)
);
