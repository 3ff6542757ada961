-- A job's resumable steps: the names of the steps it finished and the
-- cursor of the step it was in (JSON), kept across its attempts; see
-- JobContext::step.
ALTER TABLE solidq_jobs ADD COLUMN checkpoint TEXT;
