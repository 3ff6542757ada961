-- Processes: registrations, heartbeats, and finding the processes that
-- are gone. Times are the database's (LOCALTIMESTAMP, the start of the
-- enclosing transaction); durations come in microseconds.

-- name: process_insert
-- A process registered; its id is the answer.
INSERT INTO solidq_processes (kind, name, pid, hostname, supervisor_id, metadata, last_heartbeat_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, LOCALTIMESTAMP, LOCALTIMESTAMP) RETURNING id

-- name: process_heartbeat
-- A heartbeat: the database's clock into process $1's row; no row
-- changed: the process is gone. The text of mod.rs's HEARTBEAT (which
-- explain.rs reads).
UPDATE solidq_processes SET last_heartbeat_at = LOCALTIMESTAMP WHERE id = $1

-- name: process_delete
DELETE FROM solidq_processes WHERE id = $1

-- name: process_find_expired
-- Up to $3 processes other than $2 silent for more than $1 microseconds,
-- the longest silent first.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE last_heartbeat_at < LOCALTIMESTAMP - $1 * INTERVAL '1 microsecond' AND id <> $2
ORDER BY last_heartbeat_at LIMIT $3

-- name: process_find_by_pid
-- The processes of supervisor $3 with pid $2 on host $1.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE hostname = $1 AND pid = $2 AND supervisor_id = $3 ORDER BY id

-- name: process_lock
-- Process $1, locked, if it is still there and (unless $2 is negative)
-- silent for more than $2 microseconds; skipped while another pruner, or a
-- claim of that process (FOR KEY SHARE), holds its row.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE id = $1 AND ($2 < 0 OR last_heartbeat_at < LOCALTIMESTAMP - $2 * INTERVAL '1 microsecond')
FOR UPDATE SKIP LOCKED
