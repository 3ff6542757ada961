-- Batches: a set of jobs tracked together, with callback jobs enqueued
-- once when the set finishes (see src/batch.rs). The counts are updated in
-- the members' completion transactions; `pending` counts members (and
-- child batches) not finished yet.
CREATE TABLE solidq_batches (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    parent_id         BIGINT,
    description       LONGTEXT,
    callbacks         LONGTEXT     NOT NULL DEFAULT ('{}'),
    total             BIGINT       NOT NULL DEFAULT 0,
    pending           BIGINT       NOT NULL DEFAULT 0,
    succeeded         BIGINT       NOT NULL DEFAULT 0,
    failed            BIGINT       NOT NULL DEFAULT 0,
    created_at        DATETIME(6)  NOT NULL,
    closed_at         DATETIME(6),
    finished_at       DATETIME(6),
    complete_fired_at DATETIME(6),
    success_fired_at  DATETIME(6),
    failure_fired_at  DATETIME(6),
    INDEX solidq_batches_parent (parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE solidq_jobs ADD COLUMN batch_id BIGINT, ADD INDEX solidq_jobs_batch (batch_id);
