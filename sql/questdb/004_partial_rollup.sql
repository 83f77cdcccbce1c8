-- The day in progress rolled up to a watermark (src/retention/rollups.ts): one row per connection
-- and rollup run, `ts` the run's watermark. Readers take the rows of the newest watermark and the
-- raw samples after it, so a read of today never scans the whole day. Two days are enough.

CREATE TABLE IF NOT EXISTS availability_partial (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  checks LONG,
  available LONG,
  response_ms_sum DOUBLE,
  response_ms_count LONG
) TIMESTAMP(ts) PARTITION BY DAY TTL 3 DAYS WAL
DEDUP UPSERT KEYS(ts, connection_id);
