-- The job statistics. A flush upserts its rows one statement each inside
-- one write transaction; a fold looks first with a plain read, then adds
-- the old rows to the totals rows and deletes them under one BEGIN IMMEDIATE.

-- name: add_deltas
INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
    jobs = jobs + excluded.jobs,
    wait_ms = wait_ms + excluded.wait_ms,
    run_ms = run_ms + excluded.run_ms

-- name: fold/any_old
-- ?1: the totals bucket; ?2: the cutoff.
SELECT EXISTS (SELECT 1 FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2) AS v

-- name: fold/add
-- The WHERE keeps SQLite from reading ON CONFLICT as a join's ON.
INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
SELECT ?1, queue_name, kind, outcome, sum(jobs), sum(wait_ms), sum(run_ms)
FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2
GROUP BY queue_name, kind, outcome
ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
    jobs = jobs + excluded.jobs,
    wait_ms = wait_ms + excluded.wait_ms,
    run_ms = run_ms + excluded.run_ms

-- name: fold/delete
DELETE FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2
