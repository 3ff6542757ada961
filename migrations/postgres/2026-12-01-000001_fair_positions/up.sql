-- Fair share across tenants (see src/store/fair.rs): a job's fairness key,
-- and each ready row's place in claim order. A row without a key takes its
-- job's id as its place (the order claims always had); a keyed row takes
-- the place after its key's last ready row in its queue and priority, or,
-- when the key has none, the front of that queue and priority.
ALTER TABLE solidq_jobs ADD COLUMN fairness_key TEXT;
ALTER TABLE solidq_ready_executions ADD COLUMN fairness_key TEXT;
ALTER TABLE solidq_ready_executions ADD COLUMN position BIGINT NOT NULL DEFAULT 0;
UPDATE solidq_ready_executions SET position = job_id;
DROP INDEX solidq_ready_poll_all;
DROP INDEX solidq_ready_poll_by_queue;
CREATE INDEX solidq_ready_poll_all ON solidq_ready_executions (priority, position);
CREATE INDEX solidq_ready_poll_by_queue ON solidq_ready_executions (queue_name, priority, position);
-- Partial: rows without a key (most) cost this index nothing.
CREATE INDEX solidq_ready_fair ON solidq_ready_executions (queue_name, priority, fairness_key, position)
    WHERE fairness_key IS NOT NULL;
