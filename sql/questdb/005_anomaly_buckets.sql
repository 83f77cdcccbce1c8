-- The anomaly detector's 5-minute aggregates (src/anomalies/buckets.ts): per connection, metric and
-- 5 minutes, a count and a total, and for the percentile metrics one row per logarithmic bin. A
-- bucket rolled up again (late samples) replaces its rows. Nine days: a window, its 7 baseline days and
-- the catch-up.

CREATE TABLE IF NOT EXISTS anomaly_buckets (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  metric SYMBOL CAPACITY 16,
  bin LONG,
  n LONG,
  total DOUBLE
) TIMESTAMP(ts) PARTITION BY DAY TTL 9 DAYS WAL
DEDUP UPSERT KEYS(ts, connection_id, metric, bin);
