DROP INDEX solidq_ready_fair;
DROP INDEX solidq_ready_poll_all;
DROP INDEX solidq_ready_poll_by_queue;
CREATE INDEX solidq_ready_poll_all ON solidq_ready_executions (priority, job_id);
CREATE INDEX solidq_ready_poll_by_queue ON solidq_ready_executions (queue_name, priority, job_id);
ALTER TABLE solidq_ready_executions DROP COLUMN position;
ALTER TABLE solidq_ready_executions DROP COLUMN fairness_key;
ALTER TABLE solidq_jobs DROP COLUMN fairness_key;
