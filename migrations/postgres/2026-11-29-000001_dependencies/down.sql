ALTER TABLE solidq_batches DROP COLUMN edges;
DROP TABLE solidq_waiting_executions;
DROP TABLE solidq_dependencies;
