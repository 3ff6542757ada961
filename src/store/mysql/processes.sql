-- Processes: registrations, heartbeats, and finding the processes that
-- are gone. Placeholders are ?, bound in the order they appear. Times are
-- the database's (UTC_TIMESTAMP(6)); durations come in microseconds.

-- name: process_insert
-- A process registered; its id is then read with LAST_INSERT_ID() (mod.rs's
-- LAST_ID, which the enqueue shares), in the same transaction.
INSERT INTO solidq_processes (kind, name, pid, hostname, supervisor_id, metadata,
                              last_heartbeat_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))

-- name: process_heartbeat
-- A heartbeat: the database's clock into the process's row. Rows found,
-- not changed, are counted (diesel connects with CLIENT_FOUND_ROWS): none,
-- the process is gone.
UPDATE solidq_processes SET last_heartbeat_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: process_delete
DELETE FROM solidq_processes WHERE id = ?

-- name: process_find_expired
-- Up to (the third ?) processes other than (the second ?) silent for more
-- than (the first ?) microseconds, the longest silent first.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE last_heartbeat_at < (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND) AND id <> ? ORDER BY last_heartbeat_at LIMIT ?

-- name: process_find_by_pid
-- The processes of a host, pid and supervisor.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE hostname = ? AND pid = ? AND supervisor_id = ? ORDER BY id

-- name: process_lock
-- A process, locked, if it is still there and (unless the second ? is
-- negative) silent for more than (the third ?) microseconds; skipped while
-- another pruner, or a claim of that process (LOCK IN SHARE MODE), holds
-- its row.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE id = ? AND (? < 0 OR last_heartbeat_at < (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))
FOR UPDATE SKIP LOCKED
