-- MySQL's counter of jobs made ready below the tail (a table: MySQL 8 has
-- no sequences). PostgreSQL's is the sequence of 2026-12-05-000001, and
-- SQLite's claims always scan from the head. Kept as a version so the
-- three backends' migrations stay in step.
SELECT 1;
