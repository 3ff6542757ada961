-- Claims remember when their job started: a claimed job a worker holds
-- ahead in memory has not started (NULL). A dead process's never-started
-- claims are released without counting a stall; at-most-once jobs fail
-- only if they had started.
ALTER TABLE solidq_claimed_executions ADD COLUMN started_at TIMESTAMP;

-- The once-per-tick guard of recurring tasks outlives the tick's job: the
-- job may be deleted (keep_result 0, the cleaner, a discard) while a
-- lagging scheduler could still fire that tick. Rows are aged out by run_at
-- instead (see RECURRING_GUARD_RETENTION).
ALTER TABLE solidq_recurring_executions DROP CONSTRAINT solidq_recurring_executions_job_id_fkey;
CREATE INDEX solidq_recurring_executions_run_at ON solidq_recurring_executions (run_at);
