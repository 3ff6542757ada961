DROP TABLE solidq_ready_below;
