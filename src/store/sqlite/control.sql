-- Job control: an operator's actions on waiting jobs (removing pending
-- ones, making scheduled ones due, running blocked ones now) and asking
-- running ones to stop. Ids come as a JSON array (?1), now (this host's
-- clock, which is the database's) as ?2. Callers hold the write lock (a
-- transaction opened with BEGIN IMMEDIATE).

-- name: pending_remove/delete_ready
-- The ready rows of ?1, deleted; their ids tell which removed jobs were
-- ready.
DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT value FROM json_each(?1))
RETURNING job_id AS id

-- name: pending_remove/delete_scheduled
DELETE FROM solidq_scheduled_executions WHERE job_id IN (SELECT value FROM json_each(?1))
RETURNING job_id AS id

-- name: pending_remove/delete_blocked
DELETE FROM solidq_blocked_executions WHERE job_id IN (SELECT value FROM json_each(?1))
RETURNING job_id AS id

-- name: pending_remove/jobs
-- The removed jobs (?1), each marked was_ready if among the ready rows
-- deleted (?2).
SELECT id, concurrency_key, options, id IN (SELECT value FROM json_each(?2)) AS was_ready
FROM solidq_jobs WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id

-- name: scheduled_make_due/executions
-- The scheduled rows of ?1 made due now (?2); their count is the answer.
UPDATE solidq_scheduled_executions SET scheduled_at = ?2
WHERE job_id IN (SELECT value FROM json_each(?1))

-- name: scheduled_make_due/jobs
-- Their jobs take the same time.
UPDATE solidq_jobs SET scheduled_at = ?2, updated_at = ?2
WHERE id IN (SELECT job_id FROM solidq_scheduled_executions
             WHERE job_id IN (SELECT value FROM json_each(?1)))

-- name: blocked_run_now/delete
-- The blocked rows of ?1, deleted; their queues are the answer.
DELETE FROM solidq_blocked_executions WHERE job_id IN (SELECT value FROM json_each(?1))
RETURNING job_id AS id, queue_name

-- name: blocked_run_now/unlimit
-- Their jobs (?1, the ids deleted) out of their concurrency limit, due now
-- (?2).
UPDATE solidq_jobs SET concurrency_key = NULL, scheduled_at = ?2, updated_at = ?2
WHERE id IN (SELECT value FROM json_each(?1))

-- name: blocked_run_now/ready
-- Their ready rows, created now (?2), placed for fair share: the text of
-- store::fair's READY_COLUMNS and ready_rows_sql("j", "?2", "FROM
-- solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))").
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

-- name: jobs_request_cancel
-- The claimed jobs of ?1 not asked yet, asked now (?2); their ids are the
-- answer.
UPDATE solidq_jobs SET cancel_requested_at = ?2, updated_at = ?2
WHERE id IN (SELECT job_id FROM solidq_claimed_executions
             WHERE job_id IN (SELECT value FROM json_each(?1)))
  AND cancel_requested_at IS NULL
RETURNING id
