-- Queue pauses: a paused queue's row in solidq_pauses. Times are this
-- host's clock, bound by the caller.

-- name: pause_insert
-- ?1 paused at ?2; a queue paused already changes nothing.
INSERT INTO solidq_pauses (queue_name, created_at) VALUES (?1, ?2)
ON CONFLICT (queue_name) DO NOTHING

-- name: pause_delete
-- ?1 resumed.
DELETE FROM solidq_pauses WHERE queue_name = ?1
