-- The job statistics: a flush is one upsert of every row (arrays through
-- unnest), a fold one statement that deletes the old rows and adds exactly
-- what it deleted to the totals rows.

-- name: add_deltas
-- Adds deltas; the rows' keys are distinct (an upsert cannot touch a row
-- twice in one statement).
INSERT INTO solidq_job_stats AS s (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
SELECT * FROM unnest($1::timestamp[], $2::text[], $3::text[], $4::text[],
                     $5::bigint[], $6::bigint[], $7::bigint[])
ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
    jobs = s.jobs + excluded.jobs,
    wait_ms = s.wait_ms + excluded.wait_ms,
    run_ms = s.run_ms + excluded.run_ms

-- name: fold
-- $1: the totals bucket; $2: the age, in microseconds, past which a
-- minute is folded. The insert sees exactly the rows the delete removed
-- (a flush adding to an old minute meanwhile is folded next time).
WITH gone AS (
    DELETE FROM solidq_job_stats
    WHERE bucket > $1 AND bucket < LOCALTIMESTAMP - $2 * INTERVAL '1 microsecond'
    RETURNING queue_name, kind, outcome, jobs, wait_ms, run_ms
), folded AS (
    INSERT INTO solidq_job_stats AS s (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
    SELECT $1, queue_name, kind, outcome,
           sum(jobs)::bigint, sum(wait_ms)::bigint, sum(run_ms)::bigint
    FROM gone GROUP BY queue_name, kind, outcome
    ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
        jobs = s.jobs + excluded.jobs,
        wait_ms = s.wait_ms + excluded.wait_ms,
        run_ms = s.run_ms + excluded.run_ms
)
SELECT count(*) AS v FROM gone
