-- Queue pauses: a paused queue's row in solidq_pauses. Times are the
-- database's (LOCALTIMESTAMP).

-- name: pause_insert
-- $1 paused; moved counts the row inserted (none when it was paused
-- already).
WITH p AS (INSERT INTO solidq_pauses (queue_name, created_at) VALUES ($1, LOCALTIMESTAMP)
           ON CONFLICT (queue_name) DO NOTHING RETURNING queue_name)
SELECT count(*) AS moved, 0::bigint AS notified FROM p

-- name: pause_delete
-- $1 resumed, which wakes the workers that skipped the queue.
WITH d AS (DELETE FROM solidq_pauses WHERE queue_name = $1 RETURNING queue_name, nextval('solidq_ready_below') AS below)
SELECT count(*) AS moved,
       count(pg_notify('solidq', current_schema() || ':' || queue_name)) AS notified
FROM d
