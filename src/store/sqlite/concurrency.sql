-- Concurrency limits: the due executions of limited jobs, semaphores and
-- blocked executions. Every caller holds the write lock (BEGIN IMMEDIATE),
-- so no statement locks rows: one writer at a time is the serialization.
-- Times are this host's clock, bound by the caller.

-- name: scheduled_limited_due
-- Whether a limited job is due (?1: now).
SELECT EXISTS (SELECT 1 FROM solidq_scheduled_executions
               WHERE scheduled_at <= ?1 AND concurrency_key IS NOT NULL) AS due

-- name: scheduled_take_limited/find_ids
-- The due limited executions among ?1 (a JSON array of job ids), with
-- their jobs' kind and options, in priority order (?2: now).
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM solidq_scheduled_executions x JOIN solidq_jobs j ON j.id = x.job_id
WHERE x.job_id IN (SELECT value FROM json_each(?1)) AND x.concurrency_key IS NOT NULL
  AND x.scheduled_at <= ?2
ORDER BY x.priority, x.job_id

-- name: scheduled_take_limited/find_due
-- The first ?2 due limited executions (?1: now), with their jobs' kind
-- and options.
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM solidq_scheduled_executions x JOIN solidq_jobs j ON j.id = x.job_id
WHERE x.scheduled_at <= ?1 AND x.concurrency_key IS NOT NULL
ORDER BY x.scheduled_at, x.priority, x.job_id LIMIT ?2

-- name: scheduled_take_limited/delete
-- The executions found, ?1 (a JSON array of job ids).
DELETE FROM solidq_scheduled_executions WHERE job_id IN (SELECT value FROM json_each(?1))

-- name: semaphore_acquire
-- Creates the semaphore of key ?1 with one of its ?2 slots taken, or takes
-- a free one; no row when none is free. ?3: the expiry; ?4: now.
INSERT INTO solidq_semaphores (key, value, expires_at, created_at, updated_at)
VALUES (?1, ?2 - 1, ?3, ?4, ?4)
ON CONFLICT (key) DO UPDATE SET value = solidq_semaphores.value - 1, expires_at = excluded.expires_at,
                                updated_at = excluded.updated_at
WHERE solidq_semaphores.value > 0
RETURNING value

-- name: semaphore_signal
-- Gives a slot back to the semaphore of key ?1 below its limit ?2; no row
-- when there is none or it is full. ?3: the expiry; ?4: now.
UPDATE solidq_semaphores SET value = value + 1, expires_at = ?3, updated_at = ?4
WHERE key = ?1 AND value < ?2
RETURNING value

-- name: blocked_insert
-- One blocked execution (?5: its expiry; ?6: now).
INSERT INTO solidq_blocked_executions
    (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: blocked_next
-- The next blocked execution of key ?1, with its job's kind and options.
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options
FROM solidq_blocked_executions x JOIN solidq_jobs j ON j.id = x.job_id
WHERE x.concurrency_key = ?1
ORDER BY x.priority, x.job_id LIMIT 1

-- name: blocked_delete
DELETE FROM solidq_blocked_executions WHERE job_id = ?1

-- name: jobs_discard
-- Finishes job ?4 as discarded, appending the error ?1 (a JSON object) to
-- its errors by text, without parsing what is there. ?2: now; ?3: the
-- expiry.
UPDATE solidq_jobs SET finished_at = ?2, expires_at = ?3,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN '[' || ?1 || ']' ELSE substr(errors, 1, length(errors) - 1) || ',' || ?1 || ']' END,
       updated_at = ?2
WHERE id = ?4

-- name: semaphores_delete_expired
-- The semaphores expired before ?1 (now), returning their keys.
DELETE FROM solidq_semaphores WHERE expires_at < ?1 RETURNING key

-- name: blocked_expired_keys
-- The first ?2 keys with a blocked execution expired before ?1 (now).
SELECT DISTINCT concurrency_key AS key FROM solidq_blocked_executions
WHERE expires_at < ?1 ORDER BY key LIMIT ?2
