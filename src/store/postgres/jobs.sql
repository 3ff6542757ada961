-- Jobs: a job's rows and outcomes (attempts started, retries, failures,
-- progress, snoozes, releases), failed jobs retried or discarded, and the
-- cleaner. A batch is one statement: its values come as arrays ($1, $2,
-- …) expanded with unnest. Times are the database's (LOCALTIMESTAMP, the
-- start of the enclosing transaction); durations come in microseconds.
-- Errors are appended to a job's errors JSON array by text, without
-- parsing what is there: a row whose history was edited into invalid JSON
-- still gets its new error, and nothing stored needs to be valid jsonb.
-- Each error's at is set to the database's clock (the worker's host clock
-- may be off): the JSON was made by solidq, with NUL characters replaced,
-- so it is valid jsonb.

-- name: jobs_find_by_unique_keys
-- The jobs holding the unique keys of $1. The text of mod.rs's
-- FIND_BY_UNIQUE_KEYS (which explain.rs reads).
SELECT unique_key, id FROM solidq_jobs WHERE unique_key = ANY($1)

-- name: jobs_attempt_started
-- When attempts started ($2, microseconds ago), and the attempt counted
-- where the outcome does not count it ($3, 0 or 1), for the jobs of $1;
-- an attempt that ended with an outcome ends its job's run alone.
UPDATE solidq_jobs j SET started_at = LOCALTIMESTAMP - u.ago_us * INTERVAL '1 microsecond',
       attempts = j.attempts + u.count, run_alone = FALSE
FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS u(id, ago_us, count)
WHERE j.id = u.id

-- name: jobs_delete
DELETE FROM solidq_jobs WHERE id = ANY($1)

-- name: jobs_retry
-- The jobs of $1: one more attempt, their errors ($2) appended, due again
-- after their delays ($3, microseconds), and their scheduled rows.
WITH u AS (SELECT id,
                  jsonb_set(r.error::jsonb, '{at}',
                            to_jsonb(to_char(LOCALTIMESTAMP, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))::text AS error,
                  delay_us
           FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS r(id, error, delay_us)),
upd AS (
    UPDATE solidq_jobs j SET attempts = j.attempts + 1,
           errors = CASE WHEN j.errors IS NULL OR j.errors = '[]'
                         THEN '[' || u.error || ']'
                         ELSE left(j.errors, -1) || ',' || u.error || ']' END,
           scheduled_at = LOCALTIMESTAMP + u.delay_us * INTERVAL '1 microsecond',
           updated_at = LOCALTIMESTAMP
    FROM u WHERE j.id = u.id
    RETURNING j.id, j.queue_name, j.priority, j.scheduled_at, j.concurrency_key)
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, scheduled_at, LOCALTIMESTAMP, concurrency_key FROM upd

-- name: jobs_fail
-- The jobs of $1: their errors ($2) appended, $3 attempts and $4 stalls
-- counted (0 or 1 each), and the failed rows of those still there.
WITH u AS (SELECT id,
                  jsonb_set(r.error::jsonb, '{at}',
                            to_jsonb(to_char(LOCALTIMESTAMP, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))::text AS error,
                  attempt_inc, stall_inc
           FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[])
           AS r(id, error, attempt_inc, stall_inc)),
upd AS (
    UPDATE solidq_jobs j SET attempts = j.attempts + u.attempt_inc,
           stalled_count = j.stalled_count + u.stall_inc,
           errors = CASE WHEN j.errors IS NULL OR j.errors = '[]'
                         THEN '[' || u.error || ']'
                         ELSE left(j.errors, -1) || ',' || u.error || ']' END,
           updated_at = LOCALTIMESTAMP
    FROM u WHERE j.id = u.id RETURNING j.id)
INSERT INTO solidq_failed_executions (job_id, error, created_at)
SELECT u.id, u.error, LOCALTIMESTAMP FROM u JOIN upd ON upd.id = u.id

-- name: jobs_set_progress
-- The progress ($3) and checkpoint ($4) of the jobs of $1 (each kept when
-- NULL), only where the process of $2 holds the job's claim.
UPDATE solidq_jobs j SET progress = coalesce(u.progress, j.progress),
                         checkpoint = coalesce(u.checkpoint, j.checkpoint)
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[])
     AS u(id, process_id, progress, checkpoint)
WHERE j.id = u.id AND EXISTS (
    SELECT 1 FROM solidq_claimed_executions c
    WHERE c.job_id = u.id AND c.process_id = u.process_id)

-- name: jobs_snooze
-- Jobs handed back without an attempt spent ($1): due again after their
-- delay ($2, microseconds), straight to ready (and notified) when it is
-- zero and no concurrency slot must be taken again, scheduled otherwise.
-- The ready rows are placed for fair share: the text of store::fair's
-- READY_COLUMNS and ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd
-- WHERE now").
WITH u AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS u(id, delay_us)),
upd AS (
    UPDATE solidq_jobs j SET snoozes = j.snoozes + 1,
           scheduled_at = LOCALTIMESTAMP + u.delay_us * INTERVAL '1 microsecond',
           updated_at = LOCALTIMESTAMP
    FROM u WHERE j.id = u.id
    RETURNING j.id, j.queue_name, j.priority, j.scheduled_at, j.concurrency_key, j.fairness_key,
              j.kind, j.delivery,
              u.delay_us = 0 AND j.concurrency_key IS NULL AS now),
ready AS (
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
          FROM (SELECT upd.id AS id, upd.queue_name AS queue_name,
                       upd.priority AS priority, LOCALTIMESTAMP AS created_at,
                       upd.fairness_key AS fairness_key,
                       upd.kind AS kind, upd.delivery AS delivery,
                       ROW_NUMBER() OVER (PARTITION BY upd.queue_name, upd.priority, upd.fairness_key ORDER BY upd.id) AS nth
                FROM upd WHERE now) s) b
    RETURNING queue_name, nextval('solidq_ready_below') AS below),
later AS (
    INSERT INTO solidq_scheduled_executions
        (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
    SELECT id, queue_name, priority, scheduled_at, LOCALTIMESTAMP, concurrency_key FROM upd
    WHERE NOT now RETURNING job_id),
notified AS (
    SELECT count(pg_notify('solidq', current_schema() || ':' || q.queue_name)) AS n
    FROM (SELECT DISTINCT queue_name FROM ready) q)
SELECT (SELECT count(*) FROM ready) + (SELECT count(*) FROM later) AS moved,
       (SELECT n FROM notified) AS notified

-- name: jobs_release
-- Claims handed back ($1): $2 stalls counted (0 or 1; a stalled job runs
-- alone next), the error of $3
-- appended where there is one, and the jobs ready again (and notified),
-- placed for fair share: the text of store::fair's READY_COLUMNS and
-- ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd").
WITH u AS (SELECT id, stall_inc,
                  jsonb_set(r.error::jsonb, '{at}',
                            to_jsonb(to_char(LOCALTIMESTAMP, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))::text AS error
           FROM unnest($1::bigint[], $2::int[], $3::text[]) AS r(id, stall_inc, error)),
upd AS (
    UPDATE solidq_jobs j SET stalled_count = j.stalled_count + u.stall_inc,
           run_alone = j.run_alone OR u.stall_inc > 0,
           errors = CASE WHEN u.error IS NULL THEN j.errors
                         ELSE CASE WHEN j.errors IS NULL OR j.errors = '[]'
                                   THEN '[' || u.error || ']'
                                   ELSE left(j.errors, -1) || ',' || u.error || ']' END END,
           updated_at = LOCALTIMESTAMP
    FROM u WHERE j.id = u.id RETURNING j.id, j.queue_name, j.priority, j.fairness_key, j.kind, j.delivery),
ready AS (
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
          FROM (SELECT upd.id AS id, upd.queue_name AS queue_name,
                       upd.priority AS priority, LOCALTIMESTAMP AS created_at,
                       upd.fairness_key AS fairness_key,
                       upd.kind AS kind, upd.delivery AS delivery,
                       ROW_NUMBER() OVER (PARTITION BY upd.queue_name, upd.priority, upd.fairness_key ORDER BY upd.id) AS nth
                FROM upd) s) b
    RETURNING queue_name, nextval('solidq_ready_below') AS below),
notified AS (
    SELECT count(pg_notify('solidq', current_schema() || ':' || q.queue_name)) AS n
    FROM (SELECT DISTINCT queue_name FROM ready) q)
SELECT (SELECT count(*) FROM ready) AS moved, (SELECT n FROM notified) AS notified

-- name: failed_retry
-- Failed jobs ($1) back to ready: one more attempt if they had none left,
-- and a fresh stall budget (an operator decided to try again). Their ready
-- rows are placed for fair share: the text of store::fair's READY_COLUMNS
-- and ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd WHERE
-- concurrency_key IS NULL").
WITH gone AS (DELETE FROM solidq_failed_executions WHERE job_id = ANY($1) RETURNING job_id),
upd AS (
    UPDATE solidq_jobs j SET max_attempts = GREATEST(j.max_attempts, j.attempts + 1), stalled_count = 0,
           scheduled_at = LOCALTIMESTAMP, updated_at = LOCALTIMESTAMP
    FROM gone WHERE j.id = gone.job_id
    RETURNING j.id, j.queue_name, j.priority, j.concurrency_key, j.fairness_key, j.kind, j.delivery),
ready AS (
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
          FROM (SELECT upd.id AS id, upd.queue_name AS queue_name,
                       upd.priority AS priority, LOCALTIMESTAMP AS created_at,
                       upd.fairness_key AS fairness_key,
                       upd.kind AS kind, upd.delivery AS delivery,
                       ROW_NUMBER() OVER (PARTITION BY upd.queue_name, upd.priority, upd.fairness_key ORDER BY upd.id) AS nth
                FROM upd WHERE concurrency_key IS NULL) s) b
    RETURNING queue_name, nextval('solidq_ready_below') AS below),
-- Jobs under a concurrency limit go through the dispatcher, which takes
-- their slot.
limited AS (
    INSERT INTO solidq_scheduled_executions
        (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
    SELECT id, queue_name, priority, LOCALTIMESTAMP, LOCALTIMESTAMP, concurrency_key FROM upd
    WHERE concurrency_key IS NOT NULL
    RETURNING job_id),
notified AS (
    SELECT count(pg_notify('solidq', current_schema() || ':' || q.queue_name)) AS n
    FROM (SELECT DISTINCT queue_name FROM ready) q)
SELECT (SELECT count(*) FROM ready) + (SELECT count(*) FROM limited) AS moved,
       (SELECT n FROM notified) AS notified

-- name: failed_discard
-- The jobs of $1 that have failed, deleted with their failed rows (no
-- foreign key cascades them: migration 2026-12-07-000001).
WITH gone AS (DELETE FROM solidq_failed_executions WHERE job_id = ANY($1) RETURNING job_id)
DELETE FROM solidq_jobs WHERE id = ANY (ARRAY(SELECT job_id FROM gone))

-- name: jobs_count_discarded
-- The dashboard's "Discarded" tab count, unfiltered, as store/info.rs's
-- jobs_count_capped asks it (for explain.rs only): the condition is
-- info.rs's DISCARDED_SQL, the partial index solidq_jobs_discarded's
-- (a unit test there compares them).
SELECT solidq_jobs.id FROM solidq_jobs
WHERE solidq_jobs.finished_at IS NOT NULL
  AND (coalesce(solidq_jobs.errors, '') LIKE '%"kind":"discarded"%' OR coalesce(solidq_jobs.errors, '') LIKE '%"kind": "discarded"%')
ORDER BY solidq_jobs.id DESC LIMIT 1001

-- name: jobs_delete_expired
-- The cleaner: up to $1 finished jobs past their keep_result (partial
-- index on expires_at). The text of mod.rs's CLEAN_EXPIRED (which
-- explain.rs reads).
DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                                     WHERE expires_at < LOCALTIMESTAMP ORDER BY expires_at LIMIT $1)

-- name: jobs_delete_finished_before
-- Up to $2 jobs finished more than $1 microseconds ago.
DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                                     WHERE finished_at < LOCALTIMESTAMP - $1 * INTERVAL '1 microsecond' LIMIT $2)
