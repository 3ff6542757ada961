CREATE TABLE solidq_recurring_executions_old (
    task_key   TEXT      NOT NULL,
    run_at     TIMESTAMP NOT NULL,
    job_id     BIGINT    NOT NULL REFERENCES solidq_jobs (id) ON DELETE CASCADE,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (task_key, run_at)
);
INSERT INTO solidq_recurring_executions_old (task_key, run_at, job_id, created_at)
SELECT task_key, run_at, job_id, created_at FROM solidq_recurring_executions e
WHERE EXISTS (SELECT 1 FROM solidq_jobs j WHERE j.id = e.job_id);
DROP TABLE solidq_recurring_executions;
ALTER TABLE solidq_recurring_executions_old RENAME TO solidq_recurring_executions;
CREATE INDEX solidq_recurring_executions_job_id ON solidq_recurring_executions (job_id);
ALTER TABLE solidq_claimed_executions DROP COLUMN started_at;
