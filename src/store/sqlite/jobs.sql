-- Jobs: a job's rows and outcomes (attempts started, retries, failures,
-- progress, snoozes, releases), failed jobs retried or discarded, and the
-- cleaner. Ids come as a JSON array (json_each); now is this host's clock
-- (the database's), bound. Batches run a statement per job, each in the
-- caller's write transaction (BEGIN IMMEDIATE).

-- name: jobs_find_by_unique_keys
-- The jobs holding the unique keys of ?1 (a JSON array of strings). The
-- text of mod.rs's FIND_BY_UNIQUE_KEYS (which explain.rs reads).
SELECT unique_key, id FROM solidq_jobs WHERE unique_key IN (SELECT value FROM json_each(?1))

-- name: jobs_attempt_started
-- Job ?3's attempt started at ?1, and ?2 (0 or 1) attempts counted; an
-- attempt that ended with an outcome ends its job's run alone.
UPDATE solidq_jobs SET started_at = ?1, attempts = attempts + ?2, run_alone = 0 WHERE id = ?3

-- name: jobs_delete
DELETE FROM solidq_jobs WHERE id IN (SELECT value FROM json_each(?1))

-- name: jobs_retry/update
-- Job ?4: one more attempt, its error ?1 appended to its errors (by text,
-- without parsing what is there), due at ?2, updated at ?3.
UPDATE solidq_jobs SET attempts = attempts + 1,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN '[' || ?1 || ']'
                     ELSE substr(errors, 1, length(errors) - 1) || ',' || ?1 || ']' END,
       scheduled_at = ?2, updated_at = ?3 WHERE id = ?4

-- name: jobs_retry/schedule
-- Its scheduled row (job ?1), created at ?2.
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, scheduled_at, ?2, concurrency_key
FROM solidq_jobs WHERE id = ?1

-- name: jobs_fail/update
-- Job ?5: ?2 attempts and ?3 stalls counted (0 or 1 each), its error ?1
-- appended, updated at ?4. No row changed: the job is gone.
UPDATE solidq_jobs SET attempts = attempts + ?2, stalled_count = stalled_count + ?3,
       errors = CASE WHEN errors IS NULL OR errors = '[]'
                     THEN '[' || ?1 || ']'
                     ELSE substr(errors, 1, length(errors) - 1) || ',' || ?1 || ']' END,
       updated_at = ?4 WHERE id = ?5

-- name: jobs_fail/record
-- Its failed row: job ?1, error ?2, at ?3.
INSERT INTO solidq_failed_executions (job_id, error, created_at) VALUES (?1, ?2, ?3)

-- name: jobs_set_progress
-- Job ?2's progress ?1 and checkpoint ?4 (each kept when NULL), only while
-- process ?3 holds its claim.
UPDATE solidq_jobs SET progress = coalesce(?1, progress),
                       checkpoint = coalesce(?4, checkpoint)
WHERE id = ?2 AND EXISTS (
    SELECT 1 FROM solidq_claimed_executions
    WHERE job_id = ?2 AND process_id = ?3)

-- name: jobs_snooze/update
-- Job ?3 snoozed once more, due at ?1, updated at ?2.
UPDATE solidq_jobs SET snoozes = snoozes + 1, scheduled_at = ?1, updated_at = ?2
WHERE id = ?3

-- name: jobs_snooze/ready
-- Its ready row, created at ?2, if ?3 (due now) and free of a concurrency
-- slot, placed for fair share: the text of store::fair's READY_COLUMNS and
-- ready_values_of("solidq_jobs", "?2").
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
SELECT solidq_jobs.id, solidq_jobs.queue_name, solidq_jobs.priority, ?2, solidq_jobs.fairness_key,
       CASE WHEN solidq_jobs.fairness_key IS NULL THEN solidq_jobs.id
            ELSE COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority
                             AND f.fairness_key = solidq_jobs.fairness_key) + 1,
                          (SELECT MIN(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority),
                          solidq_jobs.id) END,
       solidq_jobs.kind, solidq_jobs.delivery
FROM solidq_jobs WHERE id = ?1 AND ?3 AND concurrency_key IS NULL

-- name: jobs_snooze/schedule
-- Otherwise its scheduled row, created at ?2.
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, scheduled_at, ?2, concurrency_key
FROM solidq_jobs WHERE id = ?1 AND NOT (?3 AND concurrency_key IS NULL)

-- name: jobs_release/update
-- Job ?3 handed back: ?1 stalls counted (0 or 1; a stalled job runs alone
-- next), updated at ?2.
UPDATE solidq_jobs SET stalled_count = stalled_count + ?1, run_alone = (run_alone OR ?1 > 0),
       updated_at = ?2 WHERE id = ?3

-- name: jobs_release/append_error
-- With an error: ?1 appended to job ?2's errors.
UPDATE solidq_jobs SET errors = CASE WHEN errors IS NULL OR errors = '[]'
                                     THEN '[' || ?1 || ']'
                                     ELSE substr(errors, 1, length(errors) - 1) || ',' || ?1 || ']' END
WHERE id = ?2

-- name: jobs_release/ready
-- Its ready row (job ?1), created at ?2, placed for fair share: the text
-- of store::fair's READY_COLUMNS and ready_values_of("solidq_jobs", "?2").
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
SELECT solidq_jobs.id, solidq_jobs.queue_name, solidq_jobs.priority, ?2, solidq_jobs.fairness_key,
       CASE WHEN solidq_jobs.fairness_key IS NULL THEN solidq_jobs.id
            ELSE COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority
                             AND f.fairness_key = solidq_jobs.fairness_key) + 1,
                          (SELECT MIN(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = solidq_jobs.queue_name AND f.priority = solidq_jobs.priority),
                          solidq_jobs.id) END,
       solidq_jobs.kind, solidq_jobs.delivery
FROM solidq_jobs WHERE id = ?1

-- name: failed_retry/delete
-- The failed rows of ?1, deleted; their ids are the jobs to retry.
DELETE FROM solidq_failed_executions WHERE job_id IN (SELECT value FROM json_each(?1))
RETURNING job_id AS id

-- name: failed_retry/update
-- Those jobs (?1): one more attempt if they had none left, a fresh stall
-- budget, due now (?2).
UPDATE solidq_jobs SET max_attempts = max(max_attempts, attempts + 1), stalled_count = 0,
       scheduled_at = ?2, updated_at = ?2
WHERE id IN (SELECT value FROM json_each(?1))

-- name: failed_retry/ready
-- The ready rows of those free of a concurrency limit, created at ?2,
-- placed for fair share: the text of store::fair's READY_COLUMNS and
-- ready_rows_sql("j", "?2", "FROM solidq_jobs j WHERE j.id IN (SELECT
-- value FROM json_each(?1)) AND j.concurrency_key IS NULL").
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
                   j.priority AS priority, ?2 AS created_at,
                   j.fairness_key AS fairness_key,
                   j.kind AS kind, j.delivery AS delivery,
                   ROW_NUMBER() OVER (PARTITION BY j.queue_name, j.priority, j.fairness_key ORDER BY j.id) AS nth
            FROM solidq_jobs j
            WHERE j.id IN (SELECT value FROM json_each(?1)) AND j.concurrency_key IS NULL) s) b

-- name: failed_retry/schedule_limited
-- Jobs under a concurrency limit go through the dispatcher, which takes
-- their slot: scheduled rows due now (?2).
INSERT INTO solidq_scheduled_executions
    (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
SELECT id, queue_name, priority, ?2, ?2, concurrency_key FROM solidq_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND concurrency_key IS NOT NULL

-- name: failed_discard
-- The jobs of ?1 that have failed, deleted (their failed rows go with
-- them: ON DELETE CASCADE).
DELETE FROM solidq_jobs WHERE id IN (SELECT job_id FROM solidq_failed_executions
                                     WHERE job_id IN (SELECT value FROM json_each(?1)))

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
-- The cleaner: up to ?2 finished jobs past their keep_result at ?1
-- (partial index on expires_at). The text of mod.rs's CLEAN_EXPIRED
-- (which explain.rs reads).
DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                                     WHERE expires_at < ?1 ORDER BY expires_at LIMIT ?2)

-- name: jobs_delete_finished_before
-- Up to ?2 jobs finished before ?1.
DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                                     WHERE finished_at < ?1 LIMIT ?2)

-- name: jobs_delete_expired/checkpoint
-- After each batch the cleaner deleted, by jobs_delete_expired or
-- jobs_delete_finished_before (named under the first: every backend names
-- the same operations): the WAL copied back into the database as far as
-- no reader needs it, without waiting for any. Else
-- the commit that finds the WAL past its autocheckpoint size does it, and
-- beside the cleaner that is often a claim or an enqueue.
PRAGMA wal_checkpoint(PASSIVE)
