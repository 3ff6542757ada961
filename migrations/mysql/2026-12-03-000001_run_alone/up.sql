-- A job released because the process running it died: its next run is
-- alone in its process (nothing else runs there meanwhile), so a crash
-- during that run is blamed on it and on no job beside it. Cleared when
-- an attempt of it ends with an outcome.
ALTER TABLE solidq_jobs ADD COLUMN run_alone BOOLEAN NOT NULL DEFAULT FALSE;
