-- The audit log: the entry's time is the database's clock.

-- name: insert_entry
INSERT INTO solidq_audit_log (created_at, actor, source, action, target, rows)
VALUES (LOCALTIMESTAMP, $1, $2, $3, $4, $5)
RETURNING id, created_at, actor, source, action, target, rows
