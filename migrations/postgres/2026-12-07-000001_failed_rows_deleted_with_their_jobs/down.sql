DELETE FROM solidq_failed_executions f
WHERE NOT EXISTS (SELECT 1 FROM solidq_jobs j WHERE j.id = f.job_id);
ALTER TABLE solidq_failed_executions ADD CONSTRAINT solidq_failed_executions_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES solidq_jobs (id) ON DELETE CASCADE;
