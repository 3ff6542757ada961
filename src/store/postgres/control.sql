-- Job control: an operator's actions on waiting jobs (removing pending
-- ones, making scheduled ones due, running blocked ones now) and asking
-- running ones to stop. Ids come as an array ($1); times are the
-- database's (LOCALTIMESTAMP, the start of the enclosing transaction).

-- name: pending_remove
-- The waiting rows of $1 deleted from every execution table, and their
-- jobs, each marked was_ready if its row was ready.
WITH r AS (DELETE FROM solidq_ready_executions WHERE job_id = ANY ($1)
           RETURNING job_id, true AS was_ready),
     s AS (DELETE FROM solidq_scheduled_executions WHERE job_id = ANY ($1)
           RETURNING job_id, false AS was_ready),
     b AS (DELETE FROM solidq_blocked_executions WHERE job_id = ANY ($1)
           RETURNING job_id, false AS was_ready),
     gone AS (SELECT * FROM r UNION ALL SELECT * FROM s UNION ALL SELECT * FROM b)
SELECT j.id, j.concurrency_key, j.options, gone.was_ready
FROM solidq_jobs j JOIN gone ON gone.job_id = j.id ORDER BY j.id

-- name: scheduled_make_due
-- The scheduled rows of $1 made due now, and their jobs.
WITH due AS (UPDATE solidq_scheduled_executions SET scheduled_at = LOCALTIMESTAMP
             WHERE job_id = ANY ($1) RETURNING job_id)
UPDATE solidq_jobs SET scheduled_at = LOCALTIMESTAMP, updated_at = LOCALTIMESTAMP
WHERE id IN (SELECT job_id FROM due)

-- name: blocked_run_now
-- The blocked rows of $1 deleted, their jobs out of their concurrency
-- limit and due now, and their ready rows inserted, placed for fair share
-- (the text of store::fair's READY_COLUMNS and
-- ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd")); their queues are
-- the answer.
WITH gone AS (DELETE FROM solidq_blocked_executions WHERE job_id = ANY ($1)
              RETURNING job_id),
     upd AS (UPDATE solidq_jobs SET concurrency_key = NULL,
                    scheduled_at = LOCALTIMESTAMP, updated_at = LOCALTIMESTAMP
             WHERE id IN (SELECT job_id FROM gone)
             RETURNING id, queue_name, priority, fairness_key, kind, delivery)
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
RETURNING queue_name, nextval('solidq_ready_below') AS below

-- name: jobs_request_cancel
-- The claimed jobs of $1 not asked yet, asked now; their ids are the
-- answer. The workers are told on the solidq channel as the reserved
-- queue name !cancel (store::CANCEL_CHANNEL_QUEUE), which no real queue
-- can have.
WITH asked AS (
    UPDATE solidq_jobs SET cancel_requested_at = LOCALTIMESTAMP,
           updated_at = LOCALTIMESTAMP
    WHERE id IN (SELECT job_id FROM solidq_claimed_executions WHERE job_id = ANY ($1))
      AND cancel_requested_at IS NULL
    RETURNING id),
notified AS (
    SELECT pg_notify('solidq', current_schema() || ':!cancel')
    WHERE EXISTS (SELECT 1 FROM asked))
SELECT id FROM asked, (SELECT count(*) FROM notified) n
