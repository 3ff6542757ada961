-- Claims remember when their job started (see ../../postgres).
ALTER TABLE solidq_claimed_executions ADD COLUMN started_at DATETIME(6);

-- The once-per-tick guard of recurring tasks outlives the tick's job.
ALTER TABLE solidq_recurring_executions DROP FOREIGN KEY solidq_recurring_executions_job_id_fkey;
CREATE INDEX solidq_recurring_executions_run_at ON solidq_recurring_executions (run_at);
