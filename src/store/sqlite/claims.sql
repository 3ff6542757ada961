-- Claims: recording that jobs claimed ahead have started, dispatching due
-- scheduled jobs to ready, the fence that keeps a claim its process's,
-- releasing the claims of a process or of processes gone, and finishing
-- claimed jobs. Ids come as a JSON array (json_each); now is this host's
-- clock, which is the database's. The claim itself is composed from the
-- worker's queue list (ClaimQuery) and its other statements are mod.rs's.

-- name: claimed_mark_started
-- The claims of process ?1 among ?2 (jobs claimed ahead) recorded as
-- started at ?3.
UPDATE solidq_claimed_executions SET started_at = ?3
WHERE job_id IN (SELECT value FROM json_each(?2)) AND process_id = ?1 AND started_at IS NULL

-- name: claimed_mark_unstarted
-- The claims of process ?1 among ?2 recorded as not started (a job to run
-- alone, waiting for the process's other jobs to end).
UPDATE solidq_claimed_executions SET started_at = NULL
WHERE job_id IN (SELECT value FROM json_each(?2)) AND process_id = ?1 AND started_at IS NOT NULL

-- name: scheduled_dispatch/find_due
-- Up to ?2 scheduled jobs due at ?1 and under no concurrency limit, in the
-- order they fell due.
SELECT job_id, queue_name FROM solidq_scheduled_executions
WHERE scheduled_at <= ?1 AND concurrency_key IS NULL ORDER BY scheduled_at, priority, job_id LIMIT ?2

-- name: scheduled_dispatch/ready
-- Their ready rows (?1, the ids found), created at ?2, placed for fair
-- share: the text of store::fair's READY_COLUMNS and ready_rows_sql("j",
-- "?2", "FROM solidq_jobs j WHERE j.id IN (SELECT value FROM
-- json_each(?1))").
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
            FROM solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))) s) b

-- name: scheduled_dispatch/delete
-- Their scheduled rows (?1), deleted.
DELETE FROM solidq_scheduled_executions WHERE job_id IN (SELECT value FROM json_each(?1))

-- name: claimed_held
-- The jobs of ?2 whose claim process ?1 holds.
SELECT job_id AS id FROM solidq_claimed_executions
WHERE process_id = ?1 AND job_id IN (SELECT value FROM json_each(?2))

-- name: claimed_delete_fenced
-- The fence: the claims process ?1 holds among ?2, deleted and reported.
DELETE FROM solidq_claimed_executions
WHERE process_id = ?1 AND job_id IN (SELECT value FROM json_each(?2))
RETURNING job_id AS id

-- name: claimed_delete_by_process/jobs
-- The claims of process ?1, with their jobs' facts.
SELECT j.id, c.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count, j.max_stalled_count,
       j.concurrency_key, j.options, c.started_at IS NOT NULL AS started
FROM solidq_claimed_executions c JOIN solidq_jobs j ON j.id = c.job_id
WHERE c.process_id = ?1 ORDER BY j.id

-- name: claimed_delete_by_process/delete
DELETE FROM solidq_claimed_executions WHERE process_id = ?1

-- name: claimed_delete_orphans/jobs
-- Up to ?1 claims whose process row is gone, with their jobs' facts.
SELECT j.id, c.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count, j.max_stalled_count,
       j.concurrency_key, j.options, c.started_at IS NOT NULL AS started
FROM solidq_claimed_executions c JOIN solidq_jobs j ON j.id = c.job_id
WHERE NOT EXISTS (SELECT 1 FROM solidq_processes p WHERE p.id = c.process_id)
ORDER BY j.id LIMIT ?1

-- name: claimed_delete_orphans/delete
-- Those claims (?1), deleted.
DELETE FROM solidq_claimed_executions WHERE job_id IN (SELECT value FROM json_each(?1))

-- name: jobs_succeed_fenced/group
-- Finishes at ?2 a group of fenced jobs without results and with the same
-- retention (until ?3): ?1 is a JSON array of [id, started_at] (mod.rs's
-- attempt_starts).
UPDATE solidq_jobs SET finished_at = ?2, expires_at = ?3, attempts = attempts + 1,
                       updated_at = ?2, started_at = u.value ->> 1
FROM json_each(?1) AS u WHERE solidq_jobs.id = u.value ->> 0

-- name: jobs_succeed_fenced/with_result
-- Finishes at ?1 one fenced job (?4) with its result (?3), kept until ?2,
-- its attempt started at ?5.
UPDATE solidq_jobs SET finished_at = ?1, expires_at = ?2, result = ?3,
       attempts = attempts + 1, updated_at = ?1, started_at = ?5
WHERE id = ?4

-- name: ready_since
-- Whether a job with an id above ?1 is ready, on any queue (MySQL's
-- listener reads it after a change; SQLite's workers watch the file).
SELECT EXISTS (SELECT 1 FROM solidq_ready_executions WHERE job_id > ?1) AS v
