-- Queue pauses: a paused queue's row in solidq_pauses. Times are the
-- database's (UTC_TIMESTAMP(6)).

-- name: pause_insert
-- ? paused. A queue paused already fails this statement only (a unique
-- violation, not the transaction), which the caller reads as no change.
INSERT INTO solidq_pauses (queue_name, created_at) VALUES (?, UTC_TIMESTAMP(6))

-- name: pause_delete
-- ? resumed.
DELETE FROM solidq_pauses WHERE queue_name = ?
