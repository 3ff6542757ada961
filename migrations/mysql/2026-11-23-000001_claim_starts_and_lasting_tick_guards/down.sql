DROP INDEX solidq_recurring_executions_run_at ON solidq_recurring_executions;
DELETE e FROM solidq_recurring_executions e
WHERE NOT EXISTS (SELECT 1 FROM solidq_jobs j WHERE j.id = e.job_id);
ALTER TABLE solidq_recurring_executions ADD CONSTRAINT solidq_recurring_executions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES solidq_jobs (id) ON DELETE CASCADE;
ALTER TABLE solidq_claimed_executions DROP COLUMN started_at;
