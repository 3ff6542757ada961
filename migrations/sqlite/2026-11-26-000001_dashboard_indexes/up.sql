-- The dashboard's "discarded" tab: discarded jobs among many finished ones,
-- found without scanning them all. The condition is written exactly as
-- store/info.rs's DISCARDED_SQL (a query uses a partial index only when
-- its WHERE states the index's condition).
CREATE INDEX solidq_jobs_discarded ON solidq_jobs (id)
    WHERE finished_at IS NOT NULL
      AND (coalesce(errors, '') LIKE '%"kind":"discarded"%'
           OR coalesce(errors, '') LIKE '%"kind": "discarded"%');
