DROP INDEX solidq_jobs_discarded;
