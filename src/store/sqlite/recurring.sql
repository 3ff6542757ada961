-- Recurring tasks and the guards of their ticks. Times are this host's
-- clock, which is the database's, bound by the caller.

-- name: upsert_task
-- A task inserted, or updated only when something differs, so that
-- updated_at moves only on a change. ?9 is now.
INSERT INTO solidq_recurring_tasks
    (key, schedule, timezone, kind, arguments, queue_name, priority, description, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
ON CONFLICT (key) DO UPDATE SET
    schedule = excluded.schedule, timezone = excluded.timezone, kind = excluded.kind,
    arguments = excluded.arguments, queue_name = excluded.queue_name, priority = excluded.priority,
    description = excluded.description, updated_at = excluded.updated_at
WHERE (solidq_recurring_tasks.schedule, solidq_recurring_tasks.timezone, solidq_recurring_tasks.kind,
       solidq_recurring_tasks.arguments, solidq_recurring_tasks.queue_name,
       solidq_recurring_tasks.priority, solidq_recurring_tasks.description)
      IS NOT (excluded.schedule, excluded.timezone, excluded.kind, excluded.arguments,
              excluded.queue_name, excluded.priority, excluded.description)

-- name: delete_other_tasks
-- The tasks whose keys are not in ?1 (a JSON array of strings).
DELETE FROM solidq_recurring_tasks WHERE key NOT IN (SELECT value FROM json_each(?1))

-- name: insert_guard
-- The tick's guard takes its job's created_at, the time the database
-- stored for the tick. A taken tick returns no row.
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT ?1, ?2, id, created_at FROM solidq_jobs WHERE id = ?3
ON CONFLICT (task_key, run_at) DO NOTHING
RETURNING created_at

-- name: delete_old_guards
-- Guards older than ?1 (a time), but each task's latest, ?2 at a time (the
-- run_at index finds the old ones, the primary key the later guard of the
-- same task).
DELETE FROM solidq_recurring_executions
WHERE rowid IN (
    SELECT e.rowid FROM solidq_recurring_executions e
    WHERE e.run_at < ?1
      AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                  WHERE later.task_key = e.task_key AND later.run_at > e.run_at)
    LIMIT ?2)
