-- The audit log and per-minute job statistics (see ../../postgres).
CREATE TABLE solidq_audit_log (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    created_at DATETIME(6)  NOT NULL,
    actor      VARCHAR(255) NOT NULL CHECK (actor <> ''),
    source     VARCHAR(16)  NOT NULL CHECK (source IN ('web', 'api', 'cli', 'library')),
    action     VARCHAR(255) NOT NULL CHECK (action <> ''),
    target     LONGTEXT     NOT NULL,
    `rows`     BIGINT       NOT NULL DEFAULT 0 CHECK (`rows` >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_job_stats (
    bucket     DATETIME(6)  NOT NULL,
    queue_name VARCHAR(255) NOT NULL,
    kind       VARCHAR(255) NOT NULL,
    outcome    VARCHAR(32)  NOT NULL,
    jobs       BIGINT       NOT NULL DEFAULT 0,
    wait_ms    BIGINT       NOT NULL DEFAULT 0,
    run_ms     BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, queue_name, kind, outcome)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
