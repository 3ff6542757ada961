-- Batches: a set of jobs tracked together, with callback jobs enqueued
-- once when the set finishes (see src/batch.rs). The counts are updated in
-- the members' completion transactions; `pending` counts members (and
-- child batches) not finished yet.
CREATE TABLE solidq_batches (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    parent_id         BIGINT,
    description       TEXT,
    callbacks         TEXT      NOT NULL DEFAULT '{}',
    total             BIGINT    NOT NULL DEFAULT 0,
    pending           BIGINT    NOT NULL DEFAULT 0,
    succeeded         BIGINT    NOT NULL DEFAULT 0,
    failed            BIGINT    NOT NULL DEFAULT 0,
    created_at        TIMESTAMP NOT NULL,
    closed_at         TIMESTAMP,
    finished_at       TIMESTAMP,
    complete_fired_at TIMESTAMP,
    success_fired_at  TIMESTAMP,
    failure_fired_at  TIMESTAMP
);
CREATE INDEX solidq_batches_parent ON solidq_batches (parent_id) WHERE parent_id IS NOT NULL;
ALTER TABLE solidq_jobs ADD COLUMN batch_id BIGINT;
CREATE INDEX solidq_jobs_batch ON solidq_jobs (batch_id) WHERE batch_id IS NOT NULL;
