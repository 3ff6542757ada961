DROP SEQUENCE solidq_ready_below;
