-- When the job's last attempt started, kept once it ended (the claim that
-- held it is deleted with the outcome), so a finished job shows its start
-- and its duration.
ALTER TABLE solidq_jobs ADD COLUMN started_at TIMESTAMP;
