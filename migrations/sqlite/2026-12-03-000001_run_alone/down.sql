ALTER TABLE solidq_jobs DROP COLUMN run_alone;
