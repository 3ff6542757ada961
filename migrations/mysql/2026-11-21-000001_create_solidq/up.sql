-- solidq schema, MySQL 8 / MariaDB 10.6+ flavour. Keep in step with
-- ../../postgres and ../../sqlite (same tables, columns, indexes and names).
-- Differences, all forced by MySQL:
-- * Columns that are keys or indexed are VARCHAR(255) (an index cannot
--   cover a TEXT column whole); the rest of the text is LONGTEXT.
-- * Every table is utf8mb4 with the binary collation: names and keys
--   compare byte for byte, as on the other backends ('Mail' and 'mail' are
--   two queues, two unique keys), never case- or accent-insensitively.
-- * Times are DATETIME(6) holding UTC (solidq writes UTC_TIMESTAMP(6)).
-- * No partial indexes: MySQL has none (a unique index admits many NULLs,
--   which is what the unique key's partial index does elsewhere).
-- * `key` and `rows` are reserved words: quoted with backticks.

CREATE TABLE solidq_jobs (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue_name        VARCHAR(255) NOT NULL,
    kind              VARCHAR(255) NOT NULL,
    arguments         LONGTEXT     NOT NULL,
    priority          INTEGER      NOT NULL DEFAULT 0,
    unique_key        VARCHAR(255),
    concurrency_key   VARCHAR(255),
    options           LONGTEXT     NOT NULL DEFAULT ('{}'),
    delivery          VARCHAR(16)  NOT NULL DEFAULT 'at_least_once'
                      CHECK (delivery IN ('at_least_once', 'at_most_once')),
    max_attempts      INTEGER      NOT NULL DEFAULT 1,
    max_stalled_count INTEGER,
    attempts          INTEGER      NOT NULL DEFAULT 0,
    stalled_count     INTEGER      NOT NULL DEFAULT 0,
    result            LONGTEXT,
    errors            LONGTEXT,
    scheduled_at      DATETIME(6)  NOT NULL,
    finished_at       DATETIME(6),
    expires_at        DATETIME(6),
    created_at        DATETIME(6)  NOT NULL,
    updated_at        DATETIME(6)  NOT NULL,
    UNIQUE INDEX solidq_jobs_unique_key (unique_key),
    INDEX solidq_jobs_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_ready_executions (
    job_id     BIGINT       NOT NULL PRIMARY KEY,
    queue_name VARCHAR(255) NOT NULL,
    priority   INTEGER      NOT NULL DEFAULT 0,
    created_at DATETIME(6)  NOT NULL,
    INDEX solidq_ready_poll_all (priority, job_id),
    INDEX solidq_ready_poll_by_queue (queue_name, priority, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_scheduled_executions (
    job_id          BIGINT       NOT NULL PRIMARY KEY,
    queue_name      VARCHAR(255) NOT NULL,
    priority        INTEGER      NOT NULL DEFAULT 0,
    scheduled_at    DATETIME(6)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    concurrency_key VARCHAR(255),
    INDEX solidq_scheduled_dispatch (scheduled_at, priority, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_claimed_executions (
    job_id     BIGINT      NOT NULL PRIMARY KEY,
    process_id BIGINT      NOT NULL,
    created_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_blocked_executions (
    job_id          BIGINT       NOT NULL PRIMARY KEY,
    queue_name      VARCHAR(255) NOT NULL,
    priority        INTEGER      NOT NULL DEFAULT 0,
    concurrency_key VARCHAR(255) NOT NULL,
    expires_at      DATETIME(6)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    INDEX solidq_blocked_release (concurrency_key, priority, job_id),
    INDEX solidq_blocked_maintenance (expires_at, concurrency_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_failed_executions (
    job_id     BIGINT      NOT NULL PRIMARY KEY,
    error      LONGTEXT    NOT NULL,
    created_at DATETIME(6) NOT NULL,
    CONSTRAINT solidq_failed_executions_job_id_fkey
        FOREIGN KEY (job_id) REFERENCES solidq_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_semaphores (
    `key`      VARCHAR(255) NOT NULL PRIMARY KEY,
    value      INTEGER      NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    INDEX solidq_semaphores_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_pauses (
    queue_name VARCHAR(255) NOT NULL PRIMARY KEY,
    created_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_processes (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind              VARCHAR(64)  NOT NULL,
    name              VARCHAR(255) NOT NULL,
    pid               INTEGER      NOT NULL,
    hostname          VARCHAR(255) NOT NULL,
    supervisor_id     BIGINT,
    metadata          LONGTEXT     NOT NULL DEFAULT ('{}'),
    last_heartbeat_at DATETIME(6)  NOT NULL,
    created_at        DATETIME(6)  NOT NULL,
    UNIQUE INDEX solidq_processes_name (name),
    INDEX solidq_processes_last_heartbeat_at (last_heartbeat_at),
    INDEX solidq_processes_supervisor_id (supervisor_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_recurring_tasks (
    `key`       VARCHAR(255) NOT NULL PRIMARY KEY,
    schedule    LONGTEXT     NOT NULL,
    timezone    VARCHAR(64)  NOT NULL DEFAULT 'UTC',
    kind        VARCHAR(255) NOT NULL,
    arguments   LONGTEXT     NOT NULL DEFAULT ('{}'),
    queue_name  VARCHAR(255),
    priority    INTEGER,
    description LONGTEXT,
    created_at  DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE solidq_recurring_executions (
    task_key   VARCHAR(255) NOT NULL,
    run_at     DATETIME(6)  NOT NULL,
    job_id     BIGINT       NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (task_key, run_at),
    INDEX solidq_recurring_executions_job_id (job_id),
    CONSTRAINT solidq_recurring_executions_job_id_fkey
        FOREIGN KEY (job_id) REFERENCES solidq_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
