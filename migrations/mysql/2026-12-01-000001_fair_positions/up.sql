-- Fair share across tenants (see src/store/fair.rs): a job's fairness key,
-- and each ready row's place in claim order. A row without a key takes its
-- job's id as its place (the order claims always had); a keyed row takes
-- the place after its key's last ready row in its queue and priority, or,
-- when the key has none, the front of that queue and priority. (MySQL has
-- no partial index: rows without a key are in solidq_ready_fair too.)
ALTER TABLE solidq_jobs ADD COLUMN fairness_key VARCHAR(255) NULL;
ALTER TABLE solidq_ready_executions
    ADD COLUMN fairness_key VARCHAR(255) NULL,
    ADD COLUMN position BIGINT NOT NULL DEFAULT 0;
UPDATE solidq_ready_executions SET position = job_id;
ALTER TABLE solidq_ready_executions
    DROP INDEX solidq_ready_poll_all,
    DROP INDEX solidq_ready_poll_by_queue,
    ADD INDEX solidq_ready_poll_all (priority, position),
    ADD INDEX solidq_ready_poll_by_queue (queue_name, priority, position),
    ADD INDEX solidq_ready_fair (queue_name, priority, fairness_key, position);
