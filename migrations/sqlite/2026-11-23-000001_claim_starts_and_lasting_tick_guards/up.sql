-- Keep in step with ../../postgres (same version and effect).

-- Claims remember when their job started: a claimed job a worker holds
-- ahead in memory has not started (NULL). A dead process's never-started
-- claims are released without counting a stall; at-most-once jobs fail
-- only if they had started.
ALTER TABLE solidq_claimed_executions ADD COLUMN started_at TIMESTAMP;

-- The once-per-tick guard of recurring tasks outlives the tick's job (see
-- the PostgreSQL migration). SQLite cannot drop a foreign key: the table is
-- rebuilt without it.
CREATE TABLE solidq_recurring_executions_new (
    task_key   TEXT      NOT NULL,
    run_at     TIMESTAMP NOT NULL,
    job_id     BIGINT    NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (task_key, run_at)
);
INSERT INTO solidq_recurring_executions_new (task_key, run_at, job_id, created_at)
SELECT task_key, run_at, job_id, created_at FROM solidq_recurring_executions;
DROP TABLE solidq_recurring_executions;
ALTER TABLE solidq_recurring_executions_new RENAME TO solidq_recurring_executions;
CREATE INDEX solidq_recurring_executions_job_id ON solidq_recurring_executions (job_id);
CREATE INDEX solidq_recurring_executions_run_at ON solidq_recurring_executions (run_at);
