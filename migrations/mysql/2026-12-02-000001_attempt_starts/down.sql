ALTER TABLE solidq_jobs DROP COLUMN started_at;
