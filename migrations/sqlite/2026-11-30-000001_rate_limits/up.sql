-- Rate limits (see src/concurrency.rs, RateLimit): one row per key, locked
-- while a start is granted, with the last time handed to a job sent back
-- (`next_at`, so jobs sent back together are spread); and the starts
-- granted within the last period of each key.
CREATE TABLE solidq_rate_limits (
    key        TEXT      PRIMARY KEY,
    next_at    TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE TABLE solidq_rate_starts (
    id         INTEGER   PRIMARY KEY AUTOINCREMENT,
    key        TEXT      NOT NULL,
    job_id     BIGINT    NOT NULL,
    started_at TIMESTAMP NOT NULL
);
CREATE INDEX solidq_rate_starts_key ON solidq_rate_starts (key, started_at);
