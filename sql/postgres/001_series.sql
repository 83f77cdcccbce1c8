-- Series tables for the `sql` backend (PostgreSQL and embedded PGlite), used when QUESTDB_URL
-- is unset. Columns match src/stores/series/tables.ts; the primary key is the upsert key.

CREATE TABLE availability_samples (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  available boolean NOT NULL,
  response_time_ms double precision,
  status_code bigint,
  reason text,
  error text,
  synthetic boolean NOT NULL,
  source text NOT NULL,
  PRIMARY KEY (ts, connection_id)
);
CREATE INDEX availability_samples_conn_ts ON availability_samples (connection_id, ts DESC);

CREATE TABLE executions (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  execution_id text NOT NULL,
  workflow_id text,
  status text NOT NULL,
  mode text,
  stopped_at timestamptz,
  duration_ms double precision,
  error text,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (ts, connection_id, execution_id)
);
CREATE INDEX executions_conn_ts ON executions (connection_id, ts DESC);

CREATE TABLE usage_entries (
  ts timestamptz NOT NULL,
  id text NOT NULL,
  connection_id text NOT NULL,
  entity text NOT NULL,
  usage_amount double precision NOT NULL,
  usage_entity text NOT NULL,
  custom_name text,
  cost_cents double precision NOT NULL,
  workflow_id text,
  execution_id text,
  metadata text,
  PRIMARY KEY (ts, id)
);
CREATE INDEX usage_entries_conn_ts ON usage_entries (connection_id, ts DESC);

CREATE TABLE gateway_heartbeats (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  heartbeat_id text NOT NULL,
  status text NOT NULL,
  healthy boolean NOT NULL,
  latency_ms double precision,
  version text,
  pid_alive boolean NOT NULL,
  system text,
  period_start timestamptz,
  period_end timestamptz,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cache_read_tokens bigint NOT NULL,
  cache_write_tokens bigint NOT NULL,
  request_count bigint NOT NULL,
  cost_usd double precision NOT NULL,
  received_at timestamptz NOT NULL,
  PRIMARY KEY (ts, connection_id, heartbeat_id)
);
CREATE INDEX gateway_heartbeats_conn_ts ON gateway_heartbeats (connection_id, ts DESC);

CREATE TABLE gateway_model_usage (
  ts timestamptz NOT NULL,
  connection_id text NOT NULL,
  heartbeat_id text NOT NULL,
  model text NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cost_usd double precision NOT NULL,
  cost_source text NOT NULL,
  PRIMARY KEY (ts, connection_id, heartbeat_id, model)
);
CREATE INDEX gateway_model_usage_conn_ts ON gateway_model_usage (connection_id, ts DESC);
