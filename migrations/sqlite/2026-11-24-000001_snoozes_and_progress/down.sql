ALTER TABLE solidq_jobs DROP COLUMN progress;
ALTER TABLE solidq_jobs DROP COLUMN snoozes;
