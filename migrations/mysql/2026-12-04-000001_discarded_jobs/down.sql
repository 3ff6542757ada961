DROP TABLE solidq_discarded_jobs;
