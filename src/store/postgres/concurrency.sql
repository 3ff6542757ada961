-- Concurrency limits: the due executions of limited jobs, semaphores as
-- upserts (the row lock serializes every acquire and release of one key),
-- blocked executions taken with SKIP LOCKED. Times are the database's
-- (LOCALTIMESTAMP, the start of the enclosing transaction).

-- name: scheduled_limited_due
-- Whether a limited job is due.
SELECT EXISTS (SELECT 1 FROM solidq_scheduled_executions
               WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NOT NULL) AS due

-- name: scheduled_take_limited/take_ids
-- The due limited executions among $1 (job ids), deleted and returned
-- with their jobs' kind and options, in priority order. (Steps here are
-- the two ways of taking, each one statement: by ids, or the due ones.)
WITH x AS (
    DELETE FROM solidq_scheduled_executions
    WHERE job_id = ANY ($1) AND concurrency_key IS NOT NULL AND scheduled_at <= LOCALTIMESTAMP
    RETURNING job_id, queue_name, priority, concurrency_key)
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM x JOIN solidq_jobs j ON j.id = x.job_id
ORDER BY x.priority, x.job_id

-- name: scheduled_take_limited/take_due
-- The first $1 due limited executions (skipping those others hold),
-- deleted and returned with their jobs' kind and options.
WITH due AS (
    SELECT job_id FROM solidq_scheduled_executions
    WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NOT NULL
    ORDER BY scheduled_at, priority, job_id
    LIMIT $1 FOR UPDATE SKIP LOCKED),
x AS (
    DELETE FROM solidq_scheduled_executions WHERE job_id = ANY (ARRAY(SELECT job_id FROM due))
    RETURNING job_id, queue_name, priority, concurrency_key, scheduled_at)
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM x JOIN solidq_jobs j ON j.id = x.job_id
ORDER BY x.scheduled_at, x.priority, x.job_id

-- name: semaphore_acquire
-- Creates the semaphore of key $1 with one of its $2 slots taken, or takes
-- a free one, expiring $3 microseconds from now. When none is free the
-- WHERE fails (no row) but the conflicting row is still locked.
INSERT INTO solidq_semaphores AS s (key, value, expires_at, created_at, updated_at)
VALUES ($1, $2 - 1, LOCALTIMESTAMP + $3 * INTERVAL '1 microsecond', LOCALTIMESTAMP, LOCALTIMESTAMP)
ON CONFLICT (key) DO UPDATE SET value = s.value - 1, expires_at = EXCLUDED.expires_at,
                                updated_at = EXCLUDED.updated_at
WHERE s.value > 0
RETURNING s.value

-- name: semaphore_signal
-- Gives a slot back to the semaphore of key $1 below its limit $2,
-- expiring $3 microseconds from now; no row when there is none or it is
-- full.
UPDATE solidq_semaphores SET value = value + 1,
       expires_at = LOCALTIMESTAMP + $3 * INTERVAL '1 microsecond', updated_at = LOCALTIMESTAMP
WHERE key = $1 AND value < $2
RETURNING value

-- name: blocked_insert
-- The blocked executions, as arrays of ids, queues, priorities, keys and
-- durations in microseconds (each expires its duration from now).
INSERT INTO solidq_blocked_executions (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
SELECT id, queue_name, priority, key, LOCALTIMESTAMP + duration_us * INTERVAL '1 microsecond', LOCALTIMESTAMP
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::bigint[])
    AS u(id, queue_name, priority, key, duration_us)

-- name: blocked_next
-- The next blocked execution of key $1, with its job's kind and options,
-- locked (only the blocked row: FOR UPDATE OF x), skipping those others
-- hold.
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM solidq_blocked_executions x JOIN solidq_jobs j ON j.id = x.job_id
WHERE x.concurrency_key = $1
ORDER BY x.priority, x.job_id
LIMIT 1 FOR UPDATE OF x SKIP LOCKED

-- name: blocked_delete
DELETE FROM solidq_blocked_executions WHERE job_id = $1

-- name: jobs_discard
-- Finishes the jobs as discarded: arrays of ids, errors (JSON objects) and
-- how long to keep each, in microseconds. Each error gets its at set to
-- the database's clock (the worker's host clock may be off; the JSON was
-- made by solidq, with NUL characters replaced, so it is valid jsonb) and
-- is appended to the job's errors by text, without parsing what is there.
UPDATE solidq_jobs j SET finished_at = LOCALTIMESTAMP,
       expires_at = LOCALTIMESTAMP + u.keep_us * INTERVAL '1 microsecond',
       errors = CASE WHEN j.errors IS NULL OR j.errors = '[]'
                     THEN '[' || u.error || ']' ELSE left(j.errors, -1) || ',' || u.error || ']' END,
       updated_at = LOCALTIMESTAMP
FROM (SELECT id,
             jsonb_set(r.error::jsonb, '{at}',
                       to_jsonb(to_char(LOCALTIMESTAMP, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))::text AS error,
             keep_us
      FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS r(id, error, keep_us)) AS u
WHERE j.id = u.id

-- name: semaphores_delete_expired
-- The expired semaphores, returning their keys.
DELETE FROM solidq_semaphores WHERE expires_at < LOCALTIMESTAMP RETURNING key

-- name: blocked_expired_keys
-- The first $1 keys with an expired blocked execution.
SELECT DISTINCT concurrency_key AS key FROM solidq_blocked_executions
WHERE expires_at < LOCALTIMESTAMP ORDER BY key LIMIT $1
