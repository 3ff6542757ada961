-- A counter that every statement making jobs ready anywhere but at the
-- tail of their queue (a scheduled job due, a retry, a release, a snooze,
-- a resumed queue, a fair placement, a negative priority) moves on. A
-- sequence, not a row: nextval writes no row version, so it leaves no dead
-- row behind, and it is seen at once, outside any transaction. Claims
-- compare it with what they saw last: unchanged, they start their index
-- scan where earlier claims ended instead of walking the rows claimed
-- since vacuum last ran (src/store/postgres/floor.rs).
CREATE SEQUENCE solidq_ready_below;
-- Called once, so the first move is seen: a new sequence's last_value is
-- its start whether or not nextval was ever called.
SELECT nextval('solidq_ready_below');
