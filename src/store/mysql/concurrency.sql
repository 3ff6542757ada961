-- Concurrency limits, with PostgreSQL's locking: a semaphore row is locked
-- (FOR UPDATE, or by the upsert that creates it) to the end of the
-- transaction; due and blocked executions are taken with FOR UPDATE SKIP
-- LOCKED. No DELETE … RETURNING: rows are locked and read first, then
-- deleted in the same transaction. The locking reads name the execution
-- table alone (a FOR UPDATE over a join would lock, and skip on, the jobs'
-- rows too); the jobs' kind and options are read after, without a lock.
-- Times are the database's (UTC_TIMESTAMP(6)). Lists of ids or keys travel
-- as one JSON array through JSON_TABLE, joined with STRAIGHT_JOIN (the list
-- first, then each row by primary key) rather than IN (SELECT …): MariaDB
-- (before 11.1) runs a single-table DELETE's IN subquery once per row of a
-- full scan.

-- name: scheduled_limited_due
-- A plain read: EXISTS read as a number, not a boolean.
SELECT CAST(EXISTS (SELECT 1 FROM solidq_scheduled_executions
                    WHERE scheduled_at <= UTC_TIMESTAMP(6)
                      AND concurrency_key IS NOT NULL) AS SIGNED) AS v

-- name: scheduled_take_limited/lock_ids
-- The due limited executions among ? (a JSON array of job ids), locked in
-- id order, waiting for other holders (as PostgreSQL's DELETE waits).
SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
WHERE x.concurrency_key IS NOT NULL AND x.scheduled_at <= UTC_TIMESTAMP(6)
ORDER BY x.job_id FOR UPDATE

-- name: scheduled_take_limited/lock_due
-- The first ? due limited executions, locked, skipping those others hold.
SELECT job_id, queue_name, priority, concurrency_key FROM solidq_scheduled_executions
WHERE scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NOT NULL
ORDER BY scheduled_at, priority, job_id
LIMIT ? FOR UPDATE SKIP LOCKED

-- name: scheduled_take_limited/delete
-- The executions locked, ? (a JSON array of job ids).
DELETE x FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value

-- name: scheduled_take_limited/job_facts
-- The kind and options of the jobs ? (a JSON array of ids), read without
-- a lock; a job that is gone has no row.
SELECT j.id, j.kind, j.options
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value

-- name: semaphore_acquire/ensure
-- Creates the semaphore of key ? with every one of its ? slots free,
-- expiring ? microseconds from now, or locks it as it is: the duplicate
-- key path of ON DUPLICATE KEY UPDATE takes the row's exclusive lock and
-- keeps it to the end of the transaction, changing nothing. (Its
-- affected-rows count cannot tell the two paths apart: diesel connects
-- with CLIENT_FOUND_ROWS, which counts an unchanged row as 1, like an
-- inserted one; hence semaphore_acquire/take.)
INSERT INTO solidq_semaphores (`key`, value, expires_at, created_at, updated_at)
VALUES (?, ?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE value = value

-- name: semaphore_acquire/take
-- Takes a free slot of the semaphore of key ? (the second ?) that
-- semaphore_acquire/ensure locked, expiring ? (the first) microseconds
-- from now; matches no row when none is free (the row stays locked: the
-- lock was taken by an earlier statement, which READ COMMITTED does not
-- release). expires_at is assigned before value: MySQL assigns left to
-- right.
UPDATE solidq_semaphores SET expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
       updated_at = UTC_TIMESTAMP(6), value = value - 1
WHERE `key` = ? AND value > 0

-- name: semaphore_signal
-- Gives a slot back, expiring ? microseconds from now, to the semaphore of
-- key ? below its limit ?; matches no row when there is none or it is
-- full.
UPDATE solidq_semaphores SET value = value + 1,
       expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), updated_at = UTC_TIMESTAMP(6)
WHERE `key` = ? AND value < ?

-- name: blocked_insert
-- The blocked executions as one JSON array of [id, queue, priority, key,
-- duration in microseconds]; each expires its duration from now.
INSERT INTO solidq_blocked_executions
    (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
SELECT u.id, u.queue_name, u.priority, u.concurrency_key,
       UTC_TIMESTAMP(6) + INTERVAL u.duration_us MICROSECOND, UTC_TIMESTAMP(6)
FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$[0]',
                                   queue_name VARCHAR(255) PATH '$[1]',
                                   priority INT PATH '$[2]',
                                   concurrency_key VARCHAR(255) PATH '$[3]',
                                   duration_us BIGINT PATH '$[4]')) AS u
ORDER BY u.id

-- name: blocked_next/lock
-- The next blocked execution of key ?, locked, skipping those others hold
-- (as PostgreSQL's FOR UPDATE OF x SKIP LOCKED: only the blocked row).
SELECT job_id, queue_name, priority, concurrency_key FROM solidq_blocked_executions
WHERE concurrency_key = ?
ORDER BY priority, job_id
LIMIT 1 FOR UPDATE SKIP LOCKED

-- name: blocked_next/job_facts
-- Its job's kind and options, as scheduled_take_limited/job_facts (the
-- same text).
SELECT j.id, j.kind, j.options
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value

-- name: blocked_delete
DELETE FROM solidq_blocked_executions WHERE job_id = ?

-- name: jobs_discard
-- Finishes job ? (the last) as discarded, kept ? (the first) microseconds,
-- appending its error (a JSON object, bound twice) to its errors by text,
-- without parsing what is there. The error's at is the host's clock
-- (PostgreSQL restamps it; MySQL stores it as given).
UPDATE solidq_jobs SET finished_at = UTC_TIMESTAMP(6),
       expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN CONCAT('[', ?, ']')
                     ELSE CONCAT(LEFT(errors, CHAR_LENGTH(errors) - 1), ',', ?, ']') END,
       updated_at = UTC_TIMESTAMP(6)
WHERE id = ?

-- name: jobs_discard/index
-- Job ? in the table of discarded jobs the dashboard's discarded tab reads
-- (MySQL has no partial index: migration 2026-12-04-000001). Once only:
-- a discard is final, written once.
INSERT INTO solidq_discarded_jobs (job_id) SELECT id FROM solidq_jobs WHERE id = ?
ON DUPLICATE KEY UPDATE job_id = solidq_discarded_jobs.job_id

-- name: semaphores_delete_expired/lock
-- The expired semaphores, locked in key order (waiting for a holder, as
-- PostgreSQL's DELETE waits, then seeing its committed expiry).
SELECT `key` FROM solidq_semaphores WHERE expires_at < UTC_TIMESTAMP(6)
ORDER BY `key` FOR UPDATE

-- name: semaphores_delete_expired/delete
-- The semaphores locked, ? (a JSON array of keys), compared byte for byte
-- as the table's column is.
DELETE s FROM JSON_TABLE(?, '$[*]' COLUMNS (value VARCHAR(255) PATH '$')) AS strs
STRAIGHT_JOIN solidq_semaphores s ON s.`key` = strs.value

-- name: blocked_expired_keys
-- A plain read: the first ? keys with an expired blocked execution.
SELECT DISTINCT concurrency_key AS `key` FROM solidq_blocked_executions
WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY `key` LIMIT ?
