-- MySQL's counter of jobs made ready below the tail (PostgreSQL's is the
-- sequence of 2026-12-05-000001; MySQL 8 has no sequences). Every
-- statement making jobs ready anywhere but at the tail of their queue (a
-- scheduled job due, a retry, a release, a snooze, a resumed queue, a
-- freed concurrency slot, a released dependant, a fair placement, a
-- negative priority) inserts a row in its transaction; claims read the
-- highest id and, while it stands still, start their index scan where
-- earlier claims ended instead of walking the rows claimed since purge
-- last ran (src/store/floor.rs, src/store/mysql/floor.rs). The
-- maintenance round deletes all rows but the highest.
CREATE TABLE solidq_ready_below (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY
);
-- One row, so the first move is seen.
INSERT INTO solidq_ready_below () VALUES ();
