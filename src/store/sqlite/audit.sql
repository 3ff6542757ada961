-- The audit log: the entry's time (?1) is this host's clock, which is the
-- database's.

-- name: insert_entry
INSERT INTO solidq_audit_log (created_at, actor, source, action, target, rows)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
RETURNING id, created_at, actor, source, action, target, rows
