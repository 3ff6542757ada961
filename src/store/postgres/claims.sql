-- Claims: dispatching due scheduled jobs to ready, the fence that keeps a
-- claim its process's, recording that jobs claimed ahead have started,
-- releasing the claims of a process or of processes gone, and finishing
-- claimed jobs. Ids come as arrays; times are the database's
-- (LOCALTIMESTAMP, the start of the enclosing transaction). The claim
-- itself is composed from the worker's queue list (mod.rs's claim_sql).

-- name: scheduled_dispatch
-- Up to $1 scheduled jobs due and under no concurrency limit, taken in the
-- order they fell due (skipping those another dispatcher holds), moved to
-- ready, placed for fair share (the text of store::fair's READY_COLUMNS
-- and ready_rows_sql("j", "LOCALTIMESTAMP", "FROM solidq_jobs j WHERE
-- j.id = ANY (ARRAY(SELECT job_id FROM moved))")); listeners of their
-- queues are told at commit. Their queues are the answer.
WITH due AS (
    SELECT job_id FROM solidq_scheduled_executions
    WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NULL
    ORDER BY scheduled_at, priority, job_id
    LIMIT $1 FOR UPDATE SKIP LOCKED
), moved AS (
    -- An array lookup, not a join: see the claim statement.
    DELETE FROM solidq_scheduled_executions WHERE job_id = ANY (ARRAY(SELECT job_id FROM due))
    RETURNING job_id, queue_name, priority
), ready AS (
    INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
    SELECT id, queue_name, priority, created_at, fairness_key,
           CASE WHEN fairness_key IS NULL THEN id
                ELSE MAX(first) OVER (PARTITION BY queue_name, priority, fairness_key) + nth - 1 END,
           kind, delivery
    FROM (SELECT s.id, s.queue_name, s.priority, s.created_at, s.fairness_key, s.nth,
                 CASE WHEN s.fairness_key IS NOT NULL AND s.nth = 1 THEN
                     COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                               WHERE f.queue_name = s.queue_name AND f.priority = s.priority
                                 AND f.fairness_key = s.fairness_key) + 1,
                              (SELECT MIN(f.position) FROM solidq_ready_executions f
                               WHERE f.queue_name = s.queue_name AND f.priority = s.priority),
                              s.id)
                 END AS first,
                 s.kind, s.delivery
          FROM (SELECT j.id AS id, j.queue_name AS queue_name,
                       j.priority AS priority, LOCALTIMESTAMP AS created_at,
                       j.fairness_key AS fairness_key,
                       j.kind AS kind, j.delivery AS delivery,
                       ROW_NUMBER() OVER (PARTITION BY j.queue_name, j.priority, j.fairness_key ORDER BY j.id) AS nth
                FROM solidq_jobs j WHERE j.id = ANY (ARRAY(SELECT job_id FROM moved))) s) b
    RETURNING queue_name, nextval('solidq_ready_below') AS below
), notified AS (
    SELECT count(pg_notify('solidq', current_schema() || ':' || q.queue_name)) AS n
    FROM (SELECT DISTINCT queue_name FROM ready) q
)
SELECT queue_name, (SELECT n FROM notified) AS notified FROM ready

-- name: claimed_held
-- The jobs of $2 whose claim process $1 holds.
SELECT job_id AS id FROM solidq_claimed_executions WHERE process_id = $1 AND job_id = ANY($2)

-- name: claimed_delete_fenced
-- The fence: the claims process $1 holds among $2, deleted and reported.
DELETE FROM solidq_claimed_executions WHERE process_id = $1 AND job_id = ANY($2) RETURNING job_id AS id

-- name: claimed_mark_started
-- The claims of process $1 among $2 (jobs claimed ahead) recorded as
-- started.
UPDATE solidq_claimed_executions SET started_at = LOCALTIMESTAMP
WHERE job_id = ANY($2) AND process_id = $1 AND started_at IS NULL

-- name: claimed_mark_unstarted
-- The claims of process $1 among $2 recorded as not started (a job to run
-- alone, waiting for the process's other jobs to end).
UPDATE solidq_claimed_executions SET started_at = NULL
WHERE job_id = ANY($2) AND process_id = $1 AND started_at IS NOT NULL

-- name: claimed_delete_by_process
-- The claims of process $1 deleted, with their jobs' facts.
WITH gone AS (DELETE FROM solidq_claimed_executions WHERE process_id = $1
              RETURNING job_id, process_id, started_at)
SELECT j.id, gone.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count, j.max_stalled_count,
       j.concurrency_key, j.options, gone.started_at IS NOT NULL AS started
FROM solidq_jobs j JOIN gone ON gone.job_id = j.id ORDER BY j.id

-- name: claimed_delete_orphans
-- Up to $1 claims whose process row is gone, deleted, with their jobs'
-- facts. The claim statement locks its process row (FOR KEY SHARE), so a
-- claim and the prune of its process cannot interleave into an orphan;
-- these come from rows deleted by hand.
WITH orphans AS (
    SELECT c.job_id FROM solidq_claimed_executions c
    WHERE NOT EXISTS (SELECT 1 FROM solidq_processes p WHERE p.id = c.process_id)
    ORDER BY c.job_id LIMIT $1 FOR UPDATE OF c SKIP LOCKED
), gone AS (
    DELETE FROM solidq_claimed_executions c USING orphans o WHERE c.job_id = o.job_id
    RETURNING c.job_id, c.process_id, c.started_at
)
SELECT j.id, gone.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count, j.max_stalled_count,
       j.concurrency_key, j.options, gone.started_at IS NOT NULL AS started
FROM solidq_jobs j JOIN gone ON gone.job_id = j.id ORDER BY j.id

-- name: jobs_succeed_fenced
-- Fence and finish in one statement: the claims of process $1 among $5
-- recorded as started, then only jobs whose claim by this process still
-- existed (and was deleted here) are marked finished.
--
-- $2 must be sorted ascending: each job's result ($3), keep ($4, in
-- microseconds) and time since its attempt started ($6) are found by
-- width_bucket, a binary search of $2. No joins: a join with unnest(...)
-- ran, on the generic plan (which guesses 10 rows for any array), as a
-- nested loop comparing every claim with every row of the batch, 65,000
-- comparisons for 256 jobs, and capped a work-down at 10,000 jobs/s.
WITH started AS (
    UPDATE solidq_claimed_executions SET started_at = LOCALTIMESTAMP
    WHERE job_id = ANY ($5) AND process_id = $1 AND started_at IS NULL),
fenced AS (
    DELETE FROM solidq_claimed_executions
    WHERE job_id = ANY ($2) AND process_id = $1
    RETURNING job_id)
UPDATE solidq_jobs j SET finished_at = LOCALTIMESTAMP,
       expires_at = LOCALTIMESTAMP
           + ($4::bigint[])[width_bucket(j.id, $2::bigint[])] * INTERVAL '1 microsecond',
       result = ($3::text[])[width_bucket(j.id, $2::bigint[])],
       started_at = LOCALTIMESTAMP
           - ($6::bigint[])[width_bucket(j.id, $2::bigint[])] * INTERVAL '1 microsecond',
       attempts = j.attempts + 1, updated_at = LOCALTIMESTAMP
WHERE j.id = ANY (ARRAY(SELECT job_id FROM fenced))
RETURNING j.id

-- name: ready_since
-- Whether a job with an id above $1 is ready, on any queue (MySQL's
-- listener reads it after a change; PostgreSQL's workers are told of new
-- jobs).
SELECT EXISTS (SELECT 1 FROM solidq_ready_executions WHERE job_id > $1)::int::bigint AS v
