-- Processes: registrations, heartbeats, and finding the processes that
-- are gone. Now is this host's clock (the database's), bound.

-- name: process_insert
-- A process registered, its heartbeat and creation at ?7; its id is the
-- answer.
INSERT INTO solidq_processes (kind, name, pid, hostname, supervisor_id, metadata,
                              last_heartbeat_at, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) RETURNING id

-- name: process_heartbeat
-- Process ?2's heartbeat at ?1; no row changed: the process is gone. The
-- text of mod.rs's HEARTBEAT (which explain.rs reads).
UPDATE solidq_processes SET last_heartbeat_at = ?1 WHERE id = ?2

-- name: process_delete
DELETE FROM solidq_processes WHERE id = ?1

-- name: process_find_expired
-- Up to ?3 processes other than ?2 whose last heartbeat is before ?1,
-- the longest silent first.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE last_heartbeat_at < ?1 AND id <> ?2 ORDER BY last_heartbeat_at LIMIT ?3

-- name: process_find_by_pid
-- The processes of supervisor ?3 with pid ?2 on host ?1.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE hostname = ?1 AND pid = ?2 AND supervisor_id = ?3 ORDER BY id

-- name: process_lock
-- Process ?1, if it is still there and (unless ?2 is NULL) silent since
-- before ?2. The write lock is held already (BEGIN IMMEDIATE): re-reading
-- the row is enough to see whether another pruner got there first.
SELECT id, kind, name, pid, hostname, supervisor_id, last_heartbeat_at FROM solidq_processes
WHERE id = ?1 AND (?2 IS NULL OR last_heartbeat_at < ?2)
