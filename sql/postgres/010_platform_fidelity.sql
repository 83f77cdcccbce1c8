-- Platform fidelity (#18). Workflow and scenario names, as the platform last reported them: people
-- read names, and a rename shows at once on every stored run (the runs keep only the id).
CREATE TABLE workflow_names (
  connection_id text NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  workflow_id text NOT NULL,
  name text NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (connection_id, workflow_id)
);

-- Failure reasons of the SQL series backend's executions (QuestDB: sql/questdb/003_executions.sql):
-- the failing node or module and the last step that ran.
ALTER TABLE executions ADD COLUMN error_node text;
ALTER TABLE executions ADD COLUMN last_node text;
