-- Series tables in QuestDB. Every table is WAL, partitioned by day, and deduplicated on its
-- upsert key, so a replayed write replaces the row instead of adding one. Columns match
-- src/stores/series/tables.ts. Statements must stay idempotent: they run at every start.

CREATE TABLE IF NOT EXISTS availability_samples (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  available BOOLEAN,
  response_time_ms DOUBLE,
  status_code LONG,
  reason SYMBOL,
  error VARCHAR,
  synthetic BOOLEAN,
  source SYMBOL
) TIMESTAMP(ts) PARTITION BY DAY WAL
DEDUP UPSERT KEYS(ts, connection_id);

CREATE TABLE IF NOT EXISTS executions (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  execution_id VARCHAR,
  workflow_id VARCHAR,
  status SYMBOL,
  mode SYMBOL,
  stopped_at TIMESTAMP,
  duration_ms DOUBLE,
  error VARCHAR,
  updated_at TIMESTAMP
) TIMESTAMP(ts) PARTITION BY DAY WAL
DEDUP UPSERT KEYS(ts, connection_id, execution_id);

CREATE TABLE IF NOT EXISTS usage_entries (
  ts TIMESTAMP,
  id VARCHAR,
  connection_id SYMBOL CAPACITY 65536,
  entity VARCHAR,
  usage_amount DOUBLE,
  usage_entity SYMBOL,
  custom_name VARCHAR,
  cost_cents DOUBLE,
  workflow_id VARCHAR,
  execution_id VARCHAR,
  metadata VARCHAR
) TIMESTAMP(ts) PARTITION BY DAY WAL
DEDUP UPSERT KEYS(ts, id);

CREATE TABLE IF NOT EXISTS gateway_heartbeats (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  heartbeat_id VARCHAR,
  status SYMBOL,
  healthy BOOLEAN,
  latency_ms DOUBLE,
  version VARCHAR,
  pid_alive BOOLEAN,
  system VARCHAR,
  period_start TIMESTAMP,
  period_end TIMESTAMP,
  input_tokens LONG,
  output_tokens LONG,
  cache_read_tokens LONG,
  cache_write_tokens LONG,
  request_count LONG,
  cost_usd DOUBLE,
  received_at TIMESTAMP
) TIMESTAMP(ts) PARTITION BY DAY WAL
DEDUP UPSERT KEYS(ts, connection_id, heartbeat_id);

CREATE TABLE IF NOT EXISTS gateway_model_usage (
  ts TIMESTAMP,
  connection_id SYMBOL CAPACITY 65536,
  heartbeat_id VARCHAR,
  model SYMBOL,
  input_tokens LONG,
  output_tokens LONG,
  cost_usd DOUBLE,
  cost_source SYMBOL
) TIMESTAMP(ts) PARTITION BY DAY WAL
DEDUP UPSERT KEYS(ts, connection_id, heartbeat_id, model);
