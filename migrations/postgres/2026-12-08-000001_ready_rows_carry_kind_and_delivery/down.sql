ALTER TABLE solidq_ready_executions DROP COLUMN delivery;
ALTER TABLE solidq_ready_executions DROP COLUMN kind;
