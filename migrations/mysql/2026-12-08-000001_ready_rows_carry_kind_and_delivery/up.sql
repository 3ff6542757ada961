-- A ready row carries its job's kind and delivery, which never change, so
-- that a claim taking jobs ahead of its idle threads (only fast kinds, only
-- at least once) filters its candidates on the ready index's rows instead
-- of reading each candidate's job: that read was a third of a claim's
-- buffers and cost the work-down about 17 % (src/guide/performance.md).
-- Nullable, and NULL in the rows an older release writes during a rolling
-- deploy: a claim then reads that row's job, as before.
ALTER TABLE solidq_ready_executions ADD COLUMN kind VARCHAR(255) NULL;
ALTER TABLE solidq_ready_executions ADD COLUMN delivery VARCHAR(16) NULL;
