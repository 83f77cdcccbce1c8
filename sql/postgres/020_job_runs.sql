-- Periodic jobs across nodes (#17): the start of each job's last run, so a job runs once per
-- period however many processes run the jobs role (jobs/runner.ts), not once per process.
CREATE TABLE IF NOT EXISTS job_runs (
  name text PRIMARY KEY,
  started_at timestamptz NOT NULL
);
