ALTER TABLE solidq_jobs DROP COLUMN cancel_requested_at;
ALTER TABLE solidq_jobs DROP COLUMN progress;
ALTER TABLE solidq_jobs DROP COLUMN snoozes;
