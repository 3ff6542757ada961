-- The dashboard's "discarded" tab: PostgreSQL and SQLite index discarded
-- jobs with a partial index; MySQL has none, and a full index on the
-- condition would need a generated column on every job. The tab's query
-- walks finished jobs by id instead (newest first, a page at a time).
-- Kept as a version so the three backends' migrations stay in step.
DO 0;
