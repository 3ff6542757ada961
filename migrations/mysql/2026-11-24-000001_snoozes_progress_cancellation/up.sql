-- Snoozes, progress and cancellation requests (see ../../postgres).
ALTER TABLE solidq_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE solidq_jobs ADD COLUMN progress LONGTEXT;
ALTER TABLE solidq_jobs ADD COLUMN cancel_requested_at DATETIME(6);
