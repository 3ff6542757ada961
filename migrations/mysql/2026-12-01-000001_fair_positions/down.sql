ALTER TABLE solidq_ready_executions
    DROP INDEX solidq_ready_fair,
    DROP INDEX solidq_ready_poll_all,
    DROP INDEX solidq_ready_poll_by_queue,
    ADD INDEX solidq_ready_poll_all (priority, job_id),
    ADD INDEX solidq_ready_poll_by_queue (queue_name, priority, job_id),
    DROP COLUMN position,
    DROP COLUMN fairness_key;
ALTER TABLE solidq_jobs DROP COLUMN fairness_key;
