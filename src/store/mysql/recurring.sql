-- Recurring tasks and the guards of their ticks. Times are the database's
-- (UTC_TIMESTAMP(6), read per statement, not per transaction as
-- PostgreSQL's LOCALTIMESTAMP: a tick's guard copies its job's created_at
-- rather than reading the clock again).

-- name: upsert_task
-- A task inserted, or updated only when something differs (as
-- PostgreSQL's WHERE … IS DISTINCT FROM), so that updated_at moves only on
-- a change. MySQL assigns left to right, each seeing the ones before:
-- updated_at comes first, comparing the old values with the new (<=>:
-- equal, NULLs included). VALUES(col) is the row proposed (MariaDB has no
-- AS new alias; MySQL 8 deprecates VALUES() but runs it).
INSERT INTO solidq_recurring_tasks
    (`key`, schedule, timezone, kind, arguments, queue_name, priority, description,
     created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
    updated_at = IF(schedule <=> VALUES(schedule) AND timezone <=> VALUES(timezone)
                    AND kind <=> VALUES(kind) AND arguments <=> VALUES(arguments)
                    AND queue_name <=> VALUES(queue_name)
                    AND priority <=> VALUES(priority)
                    AND description <=> VALUES(description),
                    updated_at, VALUES(updated_at)),
    schedule = VALUES(schedule), timezone = VALUES(timezone), kind = VALUES(kind),
    arguments = VALUES(arguments), queue_name = VALUES(queue_name),
    priority = VALUES(priority), description = VALUES(description)

-- name: delete_other_tasks
-- The tasks whose keys are not in ? (a JSON array of strings).
DELETE FROM solidq_recurring_tasks
WHERE `key` NOT IN (SELECT value FROM JSON_TABLE(?, '$[*]' COLUMNS (value VARCHAR(255) PATH '$')) AS strs)

-- name: insert_guard
-- The tick's guard takes its job's created_at, the time the database
-- stored for the tick. A plain INSERT, not an upsert: the affected-rows
-- count of ON DUPLICATE KEY UPDATE says 1 both for a row inserted and for
-- one left as it was under diesel's CLIENT_FOUND_ROWS, while a duplicate
-- key fails cleanly (error 1062 undoes the statement, not the
-- transaction). A racing insert of the same tick waits on the first's key
-- lock, then fails with 1062 if it committed, or inserts if it rolled
-- back: as PostgreSQL's ON CONFLICT DO NOTHING.
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT ?, ?, id, created_at FROM solidq_jobs WHERE id = ?

-- name: insert_guard/created_at
-- No RETURNING: the guard's created_at, read back.
SELECT created_at FROM solidq_recurring_executions WHERE task_key = ? AND run_at = ?

-- name: delete_old_guards
-- Guards older than ? microseconds, but each task's latest, ? at a time.
-- MySQL allows neither LIMIT in an IN subquery nor reading the table a
-- DELETE changes (error 1093) but through a derived table, which it
-- materializes first: the batch is picked there (the run_at index finds
-- the old ones, the primary key the later guard of the same task), then
-- joined to the rows it names by primary key (STRAIGHT_JOIN: the batch
-- first, so the delete locks only those).
DELETE e FROM
    (SELECT old.task_key, old.run_at FROM solidq_recurring_executions old
     WHERE old.run_at < (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
       AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                   WHERE later.task_key = old.task_key AND later.run_at > old.run_at)
     LIMIT ?) AS batch
STRAIGHT_JOIN solidq_recurring_executions e
  ON e.task_key = batch.task_key AND e.run_at = batch.run_at
