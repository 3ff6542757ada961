-- Recurring tasks and the guards of their ticks. Times are the database's
-- (LOCALTIMESTAMP, the start of the enclosing transaction).

-- name: upsert_task
-- A task inserted, or updated only when something differs, so that
-- updated_at moves only on a change.
INSERT INTO solidq_recurring_tasks AS t
    (key, schedule, timezone, kind, arguments, queue_name, priority, description, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, LOCALTIMESTAMP, LOCALTIMESTAMP)
ON CONFLICT (key) DO UPDATE SET
    schedule = EXCLUDED.schedule, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind,
    arguments = EXCLUDED.arguments, queue_name = EXCLUDED.queue_name, priority = EXCLUDED.priority,
    description = EXCLUDED.description, updated_at = EXCLUDED.updated_at
WHERE (t.schedule, t.timezone, t.kind, t.arguments, t.queue_name, t.priority, t.description)
      IS DISTINCT FROM (EXCLUDED.schedule, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.arguments,
                        EXCLUDED.queue_name, EXCLUDED.priority, EXCLUDED.description)

-- name: delete_other_tasks
-- The tasks whose keys are not in $1 (an array).
DELETE FROM solidq_recurring_tasks WHERE NOT (key = ANY ($1))

-- name: insert_guard
-- The tick's guard takes its job's created_at: within the fire
-- transaction both are the transaction's start on the database's clock.
-- A taken tick returns no row.
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT $1, $2, id, created_at FROM solidq_jobs WHERE id = $3
ON CONFLICT (task_key, run_at) DO NOTHING
RETURNING created_at

-- name: delete_old_guards
-- Guards older than $1 microseconds, but each task's latest, $2 at a time
-- (the run_at index finds the old ones, the primary key the later guard
-- of the same task).
DELETE FROM solidq_recurring_executions
WHERE (task_key, run_at) IN (
    SELECT e.task_key, e.run_at FROM solidq_recurring_executions e
    WHERE e.run_at < LOCALTIMESTAMP - $1 * INTERVAL '1 microsecond'
      AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                  WHERE later.task_key = e.task_key AND later.run_at > e.run_at)
    LIMIT $2)
