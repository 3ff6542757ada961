-- solidq schema, SQLite flavour. Keep in step with ../../postgres (same tables,
-- columns, indexes and names; only types and identity syntax differ).
-- The execution tables that every job passes through (ready, scheduled,
-- claimed, blocked) have no foreign key to solidq_jobs: every move between
-- them is one transaction that deletes what it moves, and a key check per
-- insert (a lookup and a row lock on the job) was the largest single cost of
-- a claim. failed_executions and recurring_executions keep theirs.
-- Times are TEXT "YYYY-MM-DD HH:MM:SS.ffffff" holding UTC (diesel's Timestamp on SQLite).

CREATE TABLE solidq_jobs (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_name        TEXT      NOT NULL,
    kind              TEXT      NOT NULL,
    arguments         TEXT      NOT NULL,
    priority          INTEGER   NOT NULL DEFAULT 0,
    unique_key        TEXT,
    concurrency_key   TEXT,
    options           TEXT      NOT NULL DEFAULT '{}',
    delivery          TEXT      NOT NULL DEFAULT 'at_least_once'
                      CHECK (delivery IN ('at_least_once', 'at_most_once')),
    max_attempts      INTEGER   NOT NULL DEFAULT 1,
    max_stalled_count INTEGER,
    attempts          INTEGER   NOT NULL DEFAULT 0,
    stalled_count     INTEGER   NOT NULL DEFAULT 0,
    result            TEXT,
    errors            TEXT,
    scheduled_at      TIMESTAMP NOT NULL,
    finished_at       TIMESTAMP,
    expires_at        TIMESTAMP,
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL
);
-- Partial: jobs without a key (most) cost this index nothing.
CREATE UNIQUE INDEX solidq_jobs_unique_key ON solidq_jobs (unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX solidq_jobs_expires_at ON solidq_jobs (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE solidq_ready_executions (
    job_id     INTEGER   PRIMARY KEY,
    queue_name TEXT      NOT NULL,
    priority   INTEGER   NOT NULL DEFAULT 0,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX solidq_ready_poll_all ON solidq_ready_executions (priority, job_id);
CREATE INDEX solidq_ready_poll_by_queue ON solidq_ready_executions (queue_name, priority, job_id);

CREATE TABLE solidq_scheduled_executions (
    job_id       INTEGER   PRIMARY KEY,
    queue_name   TEXT      NOT NULL,
    priority     INTEGER   NOT NULL DEFAULT 0,
    scheduled_at TIMESTAMP NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    -- Set for jobs under a concurrency limit: the dispatcher takes their
    -- slot one by one; the others move to ready in bulk.
    concurrency_key TEXT
);
CREATE INDEX solidq_scheduled_dispatch ON solidq_scheduled_executions (scheduled_at, priority, job_id);

CREATE TABLE solidq_claimed_executions (
    job_id     INTEGER   PRIMARY KEY,
    process_id BIGINT    NOT NULL,
    created_at TIMESTAMP NOT NULL
);
-- No index on process_id: finishing looks claims up by job_id (a unique
-- probe per job). With one, PostgreSQL bitmap-scanned every claim the process
-- ever held, dead ones included, until the next vacuum: finishing cost grew
-- with the run and a work-down fell from 40,000 to 10,000 jobs/s. The table
-- holds only jobs in flight, so releasing a process's claims scans it whole.

CREATE TABLE solidq_blocked_executions (
    job_id          INTEGER   PRIMARY KEY,
    queue_name      TEXT      NOT NULL,
    priority        INTEGER   NOT NULL DEFAULT 0,
    concurrency_key TEXT      NOT NULL,
    expires_at      TIMESTAMP NOT NULL,
    created_at      TIMESTAMP NOT NULL
);
CREATE INDEX solidq_blocked_release ON solidq_blocked_executions (concurrency_key, priority, job_id);
CREATE INDEX solidq_blocked_maintenance ON solidq_blocked_executions (expires_at, concurrency_key);

CREATE TABLE solidq_failed_executions (
    job_id     INTEGER   PRIMARY KEY REFERENCES solidq_jobs (id) ON DELETE CASCADE,
    error      TEXT      NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE solidq_semaphores (
    key        TEXT      PRIMARY KEY,
    value      INTEGER   NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX solidq_semaphores_expires_at ON solidq_semaphores (expires_at);

CREATE TABLE solidq_pauses (
    queue_name TEXT      PRIMARY KEY,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE solidq_processes (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT      NOT NULL,
    name              TEXT      NOT NULL,
    pid               INTEGER   NOT NULL,
    hostname          TEXT      NOT NULL,
    supervisor_id     BIGINT,
    metadata          TEXT      NOT NULL DEFAULT '{}',
    last_heartbeat_at TIMESTAMP NOT NULL,
    created_at        TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX solidq_processes_name ON solidq_processes (name);
CREATE INDEX solidq_processes_last_heartbeat_at ON solidq_processes (last_heartbeat_at);
CREATE INDEX solidq_processes_supervisor_id ON solidq_processes (supervisor_id);

CREATE TABLE solidq_recurring_tasks (
    key         TEXT      PRIMARY KEY,
    schedule    TEXT      NOT NULL,
    timezone    TEXT      NOT NULL DEFAULT 'UTC',
    kind        TEXT      NOT NULL,
    arguments   TEXT      NOT NULL DEFAULT '{}',
    queue_name  TEXT,
    priority    INTEGER,
    description TEXT,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);

CREATE TABLE solidq_recurring_executions (
    task_key   TEXT      NOT NULL,
    run_at     TIMESTAMP NOT NULL,
    job_id     BIGINT    NOT NULL REFERENCES solidq_jobs (id) ON DELETE CASCADE,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (task_key, run_at)
);
CREATE INDEX solidq_recurring_executions_job_id ON solidq_recurring_executions (job_id);
