-- The audit log: the entry's time is the database's clock. MySQL has no
-- RETURNING, so the entry is inserted, then read back by LAST_INSERT_ID()
-- (this session's, whatever others insert), both in one transaction so a
-- failure between them leaves no entry.

-- name: insert_entry
INSERT INTO solidq_audit_log (created_at, actor, source, action, target, `rows`)
VALUES (UTC_TIMESTAMP(6), ?, ?, ?, ?, ?)

-- name: insert_entry/inserted
SELECT id, created_at, actor, source, action, target, `rows`
FROM solidq_audit_log WHERE id = LAST_INSERT_ID()
