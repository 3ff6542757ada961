-- PostgreSQL drops the foreign key of solidq_failed_executions here: it
-- runs a cascade as one query per deleted job, most of the cleaner's time
-- there. MySQL keeps it: InnoDB checks it with one index lookup per deleted
-- job, and without it the cleaner was no faster (bench --backend mysql
-- --only big --big-rows 2000000 --big-clean 500000: 28,800 rows/s with
-- it, 27,300 without). Kept as a version so the three backends' migrations
-- stay in step.
SELECT 1;
