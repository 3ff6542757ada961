-- How many times a job handed itself back without spending an attempt
-- (a snooze, or an interrupted run at shutdown), bounded by its
-- max_snoozes; and the progress its current or last attempt reported.
ALTER TABLE solidq_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE solidq_jobs ADD COLUMN progress TEXT;
