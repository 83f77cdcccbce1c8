-- The month's running spend of each budget (src/budgets/watch.ts), so spend that crosses a
-- threshold is noticed at ingest rather than at the budget job's next run. Every API process adds
-- what it ingested for budgeted connections about once a second, and reads back the total of all
-- processes; the budget job and each evaluation set it to the series store's figure (plus what was
-- added meanwhile). A trigger only: warnings are decided on the store's figures (budgets/evaluate.ts).
CREATE TABLE budget_running (
  scope text NOT NULL CHECK (scope IN ('connection', 'user', 'organization')),
  target_id text NOT NULL,
  month text NOT NULL CHECK (month ~ '^[0-9]{4}-[0-9]{2}$'),
  cents double precision NOT NULL DEFAULT 0,
  -- When last set from the series store; NULL: only increments since the row was made.
  reconciled_at timestamptz,
  PRIMARY KEY (scope, target_id, month)
);
