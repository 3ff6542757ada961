-- Jobs: a job's rows and outcomes (attempts started, retries, failures,
-- progress, snoozes, releases), failed jobs retried or discarded, and the
-- cleaner. Placeholders are ?, bound in the order they appear (a value
-- used twice is bound twice). Ids come as a JSON array bound as one ?,
-- read as the table ids (JSON_TABLE); deletes and updates by a list of
-- ids join it (STRAIGHT_JOIN reads the list first, then each row by
-- primary key). Times are the database's (UTC_TIMESTAMP(6), fixed within
-- a statement, not across two); durations come in microseconds. Errors
-- are appended to a job's errors JSON array by text, without parsing what
-- is there (the error is bound twice).

-- name: jobs_find_by_unique_keys
-- The jobs holding the unique keys of ? (a JSON array of strings).
SELECT unique_key, id FROM solidq_jobs
WHERE unique_key IN (SELECT value FROM JSON_TABLE(?, '$[*]' COLUMNS (value VARCHAR(255) PATH '$')) AS k)

-- name: jobs_attempt_started
-- When attempts started, and the attempt counted where asked: ? is a JSON
-- array of [id, microseconds since it started, 0 or 1]. An attempt that
-- ended with an outcome ends its job's run alone.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$[0]', ago_us BIGINT PATH '$[1]',
                                     count INT PATH '$[2]')) AS ids
STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
SET j.started_at = (UTC_TIMESTAMP(6) - INTERVAL ids.ago_us MICROSECOND),
    j.attempts = j.attempts + ids.count, j.run_alone = FALSE

-- name: jobs_delete
-- The jobs of ? deleted (also the cleaner's second step, with the ids it
-- locked).
DELETE j FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value

-- name: jobs_retry/update
-- A job: one more attempt, its error appended, due again after a delay
-- (microseconds).
UPDATE solidq_jobs SET attempts = attempts + 1,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN CONCAT('[', ?, ']')
                     ELSE CONCAT(LEFT(errors, CHAR_LENGTH(errors) - 1), ',', ?, ']') END,
       scheduled_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), updated_at = UTC_TIMESTAMP(6)
WHERE id = ?

-- name: jobs_retry/schedule
-- Its scheduled row.
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, scheduled_at, UTC_TIMESTAMP(6), concurrency_key
FROM solidq_jobs WHERE id = ?

-- name: jobs_fail/update
-- A job: attempts and stalls counted (0 or 1 each), its error appended.
-- No row matched (rows matched count, under CLIENT_FOUND_ROWS): the job is
-- gone.
UPDATE solidq_jobs SET attempts = attempts + ?, stalled_count = stalled_count + ?,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN CONCAT('[', ?, ']')
                     ELSE CONCAT(LEFT(errors, CHAR_LENGTH(errors) - 1), ',', ?, ']') END,
       updated_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: jobs_fail/record
-- Its failed row: job, error.
INSERT INTO solidq_failed_executions (job_id, error, created_at)
VALUES (?, ?, UTC_TIMESTAMP(6))

-- name: jobs_set_progress
-- A job's progress and checkpoint (each kept when NULL), only while the
-- process given (last) holds its claim; the job's id is bound twice.
UPDATE solidq_jobs SET progress = coalesce(?, progress),
                       checkpoint = coalesce(?, checkpoint)
WHERE id = ? AND EXISTS (
    SELECT 1 FROM solidq_claimed_executions
    WHERE job_id = ? AND process_id = ?)

-- name: jobs_snooze/update
-- A job snoozed once more, due again after a delay (microseconds).
UPDATE solidq_jobs SET snoozes = snoozes + 1, scheduled_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
       updated_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: jobs_snooze/ready
-- Its ready row, if the second ? (due now) and free of a concurrency slot,
-- placed for fair share: the text of store::fair's READY_COLUMNS and
-- ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)").
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
SELECT solidq_jobs.id, solidq_jobs.queue_name, solidq_jobs.priority, UTC_TIMESTAMP(6), solidq_jobs.fairness_key,
       CASE WHEN solidq_jobs.fairness_key IS NULL THEN solidq_jobs.id
            ELSE COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority
                             AND f.fairness_key = solidq_jobs.fairness_key) + 1,
                          (SELECT MIN(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority),
                          solidq_jobs.id) END,
       solidq_jobs.kind, solidq_jobs.delivery
FROM solidq_jobs WHERE id = ? AND ? AND concurrency_key IS NULL

-- name: jobs_snooze/schedule
-- Otherwise its scheduled row.
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, scheduled_at, UTC_TIMESTAMP(6), concurrency_key
FROM solidq_jobs WHERE id = ? AND NOT (? AND concurrency_key IS NULL)

-- name: jobs_release/update_with_error
-- A job handed back with an error: stalls counted (0 or 1; a stalled job
-- runs alone next: the same count again), the error appended.
UPDATE solidq_jobs SET run_alone = (run_alone OR ? > 0), stalled_count = stalled_count + ?,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN CONCAT('[', ?, ']')
                     ELSE CONCAT(LEFT(errors, CHAR_LENGTH(errors) - 1), ',', ?, ']') END,
       updated_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: jobs_release/update
-- A job handed back without one: stalls counted (0 or 1; a stalled job
-- runs alone next: the same count again).
UPDATE solidq_jobs SET run_alone = (run_alone OR ? > 0), stalled_count = stalled_count + ?,
       updated_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: jobs_release/ready
-- Its ready row, placed for fair share: the text of store::fair's
-- READY_COLUMNS and ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)").
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
SELECT solidq_jobs.id, solidq_jobs.queue_name, solidq_jobs.priority, UTC_TIMESTAMP(6), solidq_jobs.fairness_key,
       CASE WHEN solidq_jobs.fairness_key IS NULL THEN solidq_jobs.id
            ELSE COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority
                             AND f.fairness_key = solidq_jobs.fairness_key) + 1,
                          (SELECT MIN(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority),
                          solidq_jobs.id) END,
       solidq_jobs.kind, solidq_jobs.delivery
FROM solidq_jobs WHERE id = ?

-- name: failed_retry/lock
-- The failed rows of ?, locked in id order; then the steps below, by the
-- list of the ids locked.
SELECT f.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value
ORDER BY f.job_id FOR UPDATE

-- name: failed_retry/delete
DELETE f FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value

-- name: failed_retry/update
-- Their jobs: one more attempt if they had none left, a fresh stall
-- budget, due now.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
SET j.max_attempts = GREATEST(j.max_attempts, j.attempts + 1),
    j.stalled_count = 0, j.scheduled_at = UTC_TIMESTAMP(6),
    j.updated_at = UTC_TIMESTAMP(6)

-- name: failed_retry/ready
-- The ready rows of those free of a concurrency limit, placed for fair
-- share: the text of store::fair's READY_COLUMNS and ready_rows_sql("j",
-- "UTC_TIMESTAMP(6)", "FROM <ids> STRAIGHT_JOIN solidq_jobs j ON j.id =
-- ids.value WHERE j.concurrency_key IS NULL").
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
                   j.priority AS priority, UTC_TIMESTAMP(6) AS created_at,
                   j.fairness_key AS fairness_key,
                   j.kind AS kind, j.delivery AS delivery,
                   ROW_NUMBER() OVER (PARTITION BY j.queue_name, j.priority, j.fairness_key ORDER BY j.id) AS nth
            FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
            WHERE j.concurrency_key IS NULL) s) b

-- name: failed_retry/schedule_limited
-- Jobs under a concurrency limit go through the dispatcher, which takes
-- their slot: scheduled rows due now.
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT j.id, j.queue_name, j.priority, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
       j.concurrency_key
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
WHERE j.concurrency_key IS NOT NULL

-- name: failed_discard
-- The jobs of ? that have failed, deleted (their failed rows go with
-- them: ON DELETE CASCADE).
DELETE j FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value
STRAIGHT_JOIN solidq_jobs j ON j.id = f.job_id

-- name: jobs_count_discarded
-- The dashboard's "Discarded" tab count, unfiltered, as store/info.rs's
-- jobs_count_capped asks it (for explain.rs only): MySQL has no partial
-- index, its discarded jobs' ids are solidq_discarded_jobs (info.rs's
-- discarded_sql; a unit test there compares them).
SELECT solidq_jobs.id FROM solidq_jobs
WHERE solidq_jobs.finished_at IS NOT NULL
  AND solidq_jobs.id IN (SELECT job_id FROM solidq_discarded_jobs)
ORDER BY solidq_jobs.id DESC LIMIT 1001

-- name: jobs_delete_expired
-- The cleaner: up to ? finished jobs past their keep_result, oldest
-- expiry first, in one statement (the solidq_jobs_expires_at index). It
-- was two, the ids locked with SKIP LOCKED and then deleted by
-- jobs_delete: one statement deleted 64,000 rows/s against 47,000 (bench
-- --only big, 2 million kept, 500,000 deleted). Two cleaners at once (two
-- supervisors) lock the rows in the same order: the second waits for the
-- first's batch instead of skipping it, and cannot deadlock with it.
DELETE FROM solidq_jobs WHERE expires_at < UTC_TIMESTAMP(6)
ORDER BY expires_at LIMIT ?

-- name: jobs_delete_finished_before/lock
-- Up to (the second ?) jobs finished more than (the first ?) microseconds
-- ago, locked (several callers skip each other's batches; MySQL deletes
-- with no LIMIT in a subquery); then jobs_delete.
SELECT id FROM solidq_jobs WHERE finished_at < (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
LIMIT ? FOR UPDATE SKIP LOCKED
