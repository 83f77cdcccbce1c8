-- Platform fidelity (#18): a failed run's failing node or module and the last step that ran.
ALTER TABLE executions ADD COLUMN IF NOT EXISTS error_node VARCHAR;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS last_node VARCHAR;
