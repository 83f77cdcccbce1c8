-- The detector's two gateway metrics (src/anomalies/baselines.ts): the p95 latency heartbeats
-- report and the tokens of the hour. `response_time` is now the p95 of successful checks.
ALTER TABLE anomalies DROP CONSTRAINT IF EXISTS anomalies_metric_check;
ALTER TABLE anomalies ADD CONSTRAINT anomalies_metric_check
  CHECK (metric IN ('response_time', 'failure_rate', 'execution_failure_rate', 'gateway_latency',
                    'token_volume', 'token_spend'));
