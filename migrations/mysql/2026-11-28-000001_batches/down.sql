ALTER TABLE solidq_jobs DROP INDEX solidq_jobs_batch, DROP COLUMN batch_id;
DROP TABLE solidq_batches;
