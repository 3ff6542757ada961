-- How many times a job handed itself back without spending an attempt
-- (a snooze, or an interrupted run at shutdown), bounded by its
-- max_snoozes; the progress its current or last attempt reported; and when
-- an operator asked its running attempt to stop.
ALTER TABLE solidq_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE solidq_jobs ADD COLUMN progress TEXT;
ALTER TABLE solidq_jobs ADD COLUMN cancel_requested_at TIMESTAMP;
