DROP INDEX solidq_jobs_batch;
ALTER TABLE solidq_jobs DROP COLUMN batch_id;
DROP TABLE solidq_batches;
