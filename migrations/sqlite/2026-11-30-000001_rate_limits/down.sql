DROP TABLE solidq_rate_starts;
DROP TABLE solidq_rate_limits;
