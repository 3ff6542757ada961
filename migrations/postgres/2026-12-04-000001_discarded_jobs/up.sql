-- MySQL's table of discarded jobs' ids (it has no partial index): here
-- the partial index solidq_jobs_discarded (2026-11-26-000001) does that
-- work. Kept as a version so the three backends' migrations stay in step.
SELECT 1;
