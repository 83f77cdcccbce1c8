-- Maintenance windows (docs/maintenance.md): samples taken while their connection was under
-- maintenance, and their count in the rollups (NULL in rows written before, read as 0).
ALTER TABLE availability_samples ADD COLUMN IF NOT EXISTS maintenance BOOLEAN;
ALTER TABLE availability_daily ADD COLUMN IF NOT EXISTS maintenance LONG;
ALTER TABLE availability_monthly ADD COLUMN IF NOT EXISTS maintenance LONG;
ALTER TABLE availability_partial ADD COLUMN IF NOT EXISTS maintenance LONG;
