-- Gateway heartbeat expectations (NULL = defaults in src/probes/heartbeats.ts) and the last
-- heartbeat seen, written by ingest at most every few seconds per connection.
ALTER TABLE connections
  ADD COLUMN heartbeat_interval_seconds integer CHECK (heartbeat_interval_seconds > 0),
  ADD COLUMN heartbeat_grace_seconds integer CHECK (heartbeat_grace_seconds >= 0),
  ADD COLUMN last_heartbeat_at timestamptz;
CREATE INDEX connections_gateways ON connections (last_heartbeat_at) WHERE service_type = 'gateway';
