-- The day in progress rolled up to a watermark for the `sql` backend (src/retention/rollups.ts):
-- one row per connection and rollup run, `ts` the run's watermark; the retention job removes rows
-- older than two days. rollup_state.partial_through is the newest watermark whose rows are all
-- written: readers take those rows and the raw samples after it.

CREATE TABLE availability_partial (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  checks bigint NOT NULL,
  available bigint NOT NULL,
  response_ms_sum double precision NOT NULL,
  response_ms_count bigint NOT NULL,
  PRIMARY KEY (ts, connection_id)
);

ALTER TABLE rollup_state ADD COLUMN partial_through timestamptz;
