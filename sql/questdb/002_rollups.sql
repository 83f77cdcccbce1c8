-- Retention (README: Retention). Raw availability samples are kept at most as long as the longest
-- plan (enterprise, 365 days); shorter plans are removed earlier by Vigil's retention job, which
-- rewrites old day partitions without the expired connections' rows. Rollups outlive the raw
-- samples: daily rows at least 400 days (14 monthly partitions), monthly rows at least 5 years.

ALTER TABLE availability_samples SET TTL 365 DAYS;

CREATE TABLE IF NOT EXISTS availability_daily (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  checks LONG,
  available LONG,
  response_ms_sum DOUBLE,
  response_ms_count LONG
) TIMESTAMP(ts) PARTITION BY MONTH TTL 14 MONTHS WAL
DEDUP UPSERT KEYS(ts, connection_id);

CREATE TABLE IF NOT EXISTS availability_monthly (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  checks LONG,
  available LONG,
  response_ms_sum DOUBLE,
  response_ms_count LONG
) TIMESTAMP(ts) PARTITION BY YEAR TTL 6 YEARS WAL
DEDUP UPSERT KEYS(ts, connection_id);
