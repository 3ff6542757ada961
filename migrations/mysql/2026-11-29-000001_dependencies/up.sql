-- Job dependencies (see src/workflow.rs): a member of a batch may wait for
-- other members of the same batch. `solidq_dependencies` holds the edges
-- (kept after they resolve, for the tree the CLI shows): `outcome` is NULL
-- while the parent has not ended, then `succeeded` or `failed`.
-- `solidq_waiting_executions` holds the jobs waiting for parents; the
-- job's own run time stays in solidq_jobs.scheduled_at.
CREATE TABLE solidq_dependencies (
    job_id     BIGINT       NOT NULL,
    parent_id  BIGINT       NOT NULL,
    batch_id   BIGINT       NOT NULL,
    outcome    VARCHAR(16),
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (job_id, parent_id),
    INDEX solidq_dependencies_parent (parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE solidq_waiting_executions (
    job_id     BIGINT       NOT NULL PRIMARY KEY,
    queue_name VARCHAR(255) NOT NULL,
    priority   INT          NOT NULL DEFAULT 0,
    run_anyway BOOLEAN      NOT NULL DEFAULT false,
    created_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- How many edges a batch's members have: completions of members of a batch
-- without any skip the dependency statements.
ALTER TABLE solidq_batches ADD COLUMN edges BIGINT NOT NULL DEFAULT 0;
