-- Job control: an operator's actions on waiting jobs (removing pending
-- ones, making scheduled ones due, running blocked ones now) and asking
-- running ones to stop. Ids come as a JSON array bound as one ?, read as
-- the table ids (JSON_TABLE); times are the database's (UTC_TIMESTAMP(6),
-- fixed within a statement, not across two). MySQL has no DELETE …
-- RETURNING nor a WITH that writes, so each step locks and reads its rows
-- (FOR UPDATE, in id order, waiting for other holders as PostgreSQL's
-- DELETE and UPDATE wait), then changes exactly those, by the list of the
-- ids it locked. Deletes and updates by a list of ids join it, not
-- IN (SELECT …): MariaDB (before 11.1) runs a single-table DELETE or
-- UPDATE's IN subquery once per row of a full scan. STRAIGHT_JOIN reads
-- the list first, then each row by primary key.

-- name: pending_remove/lock_ready
-- Per execution table (ready first: the rows deleted from it tell which
-- removed jobs were ready): lock the rows of ?, then delete the ones
-- locked.
SELECT t.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_ready_executions t ON t.job_id = ids.value
ORDER BY t.job_id FOR UPDATE

-- name: pending_remove/delete_ready
DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_ready_executions t ON t.job_id = ids.value

-- name: pending_remove/lock_scheduled
SELECT t.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_scheduled_executions t ON t.job_id = ids.value
ORDER BY t.job_id FOR UPDATE

-- name: pending_remove/delete_scheduled
DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_scheduled_executions t ON t.job_id = ids.value

-- name: pending_remove/lock_blocked
SELECT t.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_blocked_executions t ON t.job_id = ids.value
ORDER BY t.job_id FOR UPDATE

-- name: pending_remove/delete_blocked
DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_blocked_executions t ON t.job_id = ids.value

-- name: pending_remove/jobs
-- The removed jobs' facts; was_ready is filled in from the ready rows
-- deleted.
SELECT j.id, j.concurrency_key, j.options, 0 AS was_ready
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value ORDER BY j.id

-- name: scheduled_make_due/executions
-- The scheduled rows of ? made due now: their count, of rows matched under
-- CLIENT_FOUND_ROWS, is the answer.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
SET x.scheduled_at = UTC_TIMESTAMP(6)

-- name: scheduled_make_due/jobs
-- The jobs take their execution's new time, so both hold the same
-- instant (UTC_TIMESTAMP(6) is fixed within a statement, not across two).
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
STRAIGHT_JOIN solidq_jobs j ON j.id = x.job_id
SET j.scheduled_at = x.scheduled_at, j.updated_at = x.scheduled_at

-- name: blocked_run_now/lock
-- The blocked rows of ?, locked; their queues are the answer.
SELECT b.job_id, b.queue_name FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_blocked_executions b ON b.job_id = ids.value
ORDER BY b.job_id FOR UPDATE

-- name: blocked_run_now/delete
-- The rows locked (?), deleted.
DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_blocked_executions t ON t.job_id = ids.value

-- name: blocked_run_now/unlimit
-- Their jobs out of their concurrency limit, due now.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
SET j.concurrency_key = NULL, j.scheduled_at = UTC_TIMESTAMP(6), j.updated_at = UTC_TIMESTAMP(6)

-- name: blocked_run_now/ready
-- Their ready rows, created at the jobs' new scheduled_at (the same
-- instant), placed for fair share: the text of store::fair's
-- READY_COLUMNS and ready_rows_sql("j", "j.scheduled_at", "FROM <ids>
-- STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value"), then ORDER BY id.
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
                   j.priority AS priority, j.scheduled_at AS created_at,
                   j.fairness_key AS fairness_key,
                   j.kind AS kind, j.delivery AS delivery,
                   ROW_NUMBER() OVER (PARTITION BY j.queue_name, j.priority, j.fairness_key ORDER BY j.id) AS nth
            FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value) s) b
ORDER BY id

-- name: jobs_request_cancel/lock
-- Claimed jobs of ? not asked yet, locked in id order (the claims are
-- read, not locked).
SELECT j.id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
WHERE j.cancel_requested_at IS NULL
  AND EXISTS (SELECT 1 FROM solidq_claimed_executions c WHERE c.job_id = j.id)
ORDER BY j.id FOR UPDATE

-- name: jobs_request_cancel/ask
-- The jobs locked (?), asked now.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
SET j.cancel_requested_at = UTC_TIMESTAMP(6), j.updated_at = UTC_TIMESTAMP(6)
