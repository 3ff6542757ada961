-- The dashboard's "discarded" tab among millions of finished jobs.
-- PostgreSQL and SQLite find discarded jobs through a partial index
-- (2026-11-26-000001). MySQL has no partial index, and an index on a
-- virtual column halved the cleaner's rate and the inserts' (measured on
-- MariaDB with 10 million finished jobs): the discarded jobs' ids are
-- kept here instead, written by jobs_discard beside the job, deleted with
-- it. A job's discard is final, so a row here never goes stale.
CREATE TABLE solidq_discarded_jobs (
    job_id BIGINT NOT NULL PRIMARY KEY,
    CONSTRAINT solidq_discarded_jobs_job_id_fkey
        FOREIGN KEY (job_id) REFERENCES solidq_jobs (id) ON DELETE CASCADE
);
-- The jobs discarded before this migration (a job's errors end with a
-- discard: store/info.rs's DISCARDED_SQL).
INSERT INTO solidq_discarded_jobs (job_id)
SELECT id FROM solidq_jobs
WHERE finished_at IS NOT NULL
  AND (coalesce(errors, '') LIKE '%"kind":"discarded"%'
       OR coalesce(errors, '') LIKE '%"kind": "discarded"%');
