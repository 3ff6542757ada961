-- Job dependencies (see src/workflow.rs): a member of a batch may wait for
-- other members of the same batch. `solidq_dependencies` holds the edges
-- (kept after they resolve, for the tree the CLI shows): `outcome` is NULL
-- while the parent has not ended, then `succeeded` or `failed`.
-- `solidq_waiting_executions` holds the jobs waiting for parents; the
-- job's own run time stays in solidq_jobs.scheduled_at.
CREATE TABLE solidq_dependencies (
    job_id     BIGINT    NOT NULL,
    parent_id  BIGINT    NOT NULL,
    batch_id   BIGINT    NOT NULL,
    outcome    TEXT,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (job_id, parent_id)
);
CREATE INDEX solidq_dependencies_parent ON solidq_dependencies (parent_id);
CREATE TABLE solidq_waiting_executions (
    job_id     BIGINT    PRIMARY KEY,
    queue_name TEXT      NOT NULL,
    priority   INTEGER   NOT NULL DEFAULT 0,
    run_anyway BOOLEAN   NOT NULL DEFAULT false,
    created_at TIMESTAMP NOT NULL
);
-- How many edges a batch's members have: completions of members of a batch
-- without any skip the dependency statements.
ALTER TABLE solidq_batches ADD COLUMN edges BIGINT NOT NULL DEFAULT 0;
