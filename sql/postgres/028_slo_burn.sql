-- Burn-rate alerts of SLOs (issue #33; docs/api.md: SLOs). The `slo_burn` incident kind and
-- alert kind, and per SLO the severity its last evaluation found (NULL: no alert condition held),
-- so the job opens an incident when a condition starts to hold and resolves it when none does
-- (edge-triggered: an incident a person resolved is not reopened while the burn goes on).
ALTER TABLE incidents DROP CONSTRAINT incidents_kind_check;
ALTER TABLE incidents ADD CONSTRAINT incidents_kind_check
  CHECK (kind IN ('availability', 'missed_heartbeat', 'anomaly', 'budget', 'slo_burn'));
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check
  CHECK (kind IN ('failure', 'recovery', 'audit', 'budget_warning', 'anomaly', 'invitation', 'acknowledged',
                  'escalation', 'slo_burn'));
ALTER TABLE connection_slos ADD COLUMN burn_severity text CHECK (burn_severity IN ('page', 'ticket'));
ALTER TABLE connection_slos ADD COLUMN burn_evaluated_at timestamptz;
