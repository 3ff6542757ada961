ALTER TABLE solidq_jobs DROP COLUMN checkpoint;
