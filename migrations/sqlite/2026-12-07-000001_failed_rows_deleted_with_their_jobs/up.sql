-- PostgreSQL drops the foreign key of solidq_failed_executions here: it
-- runs a cascade as one query per deleted job, most of the cleaner's time
-- there. SQLite keeps it: its check is one rowid lookup per deleted job,
-- and dropping it means rebuilding the table. Kept as a version so the
-- three backends' migrations stay in step.
SELECT 1;
