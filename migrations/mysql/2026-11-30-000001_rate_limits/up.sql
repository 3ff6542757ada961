-- Rate limits (see src/concurrency.rs, RateLimit): one row per key, locked
-- while a start is granted, with the last time handed to a job sent back
-- (`next_at`, so jobs sent back together are spread); and the starts
-- granted within the last period of each key.
CREATE TABLE solidq_rate_limits (
    `key`      VARCHAR(255) NOT NULL PRIMARY KEY,
    next_at    DATETIME(6)  NOT NULL,
    created_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE solidq_rate_starts (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    `key`      VARCHAR(255) NOT NULL,
    job_id     BIGINT       NOT NULL,
    started_at DATETIME(6)  NOT NULL,
    INDEX solidq_rate_starts_key (`key`, started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
