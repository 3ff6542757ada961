-- What operators did, newest first by id: who (actor), through what
-- (source), what (action), to what (target: a job id, a queue name, a
-- recurring task's key or a JSON description of a filter) and how many
-- rows it changed. Written by the CLI and the dashboard after each action
-- that changes state; nothing prunes it.
CREATE TABLE solidq_audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TIMESTAMP NOT NULL,
    actor      TEXT      NOT NULL CHECK (actor <> ''),
    source     TEXT      NOT NULL CHECK (source IN ('web', 'api', 'cli', 'library')),
    action     TEXT      NOT NULL CHECK (action <> ''),
    target     TEXT      NOT NULL,
    rows       BIGINT    NOT NULL DEFAULT 0 CHECK (rows >= 0)
);

-- Outcomes counted by workers, per minute (bucket: the start of the minute
-- on the backend's clock: the database's on PostgreSQL, the host's on
-- SQLite), queue, kind and outcome (succeeded, failed, retried,
-- snoozed, discarded, stalled). Workers add deltas (an upsert) at most once
-- per heartbeat; the release of a dead process's jobs adds its stalls in
-- the transaction of that release. The cleaner folds rows older than a day into one
-- totals row per (queue, kind, outcome) at bucket 1970-01-01 00:00:00 in
-- the same transaction that deletes them, so sums over the table never
-- decrease (they back Prometheus counters). No CHECK on outcome: a newer
-- version may count more outcomes without a migration.
CREATE TABLE solidq_job_stats (
    bucket     TIMESTAMP NOT NULL,
    queue_name TEXT      NOT NULL,
    kind       TEXT      NOT NULL,
    outcome    TEXT      NOT NULL,
    jobs       BIGINT    NOT NULL DEFAULT 0,
    -- Sum over the jobs of (started_at - the time the job became due).
    wait_ms    BIGINT    NOT NULL DEFAULT 0,
    -- Sum over the jobs of their run time.
    run_ms     BIGINT    NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, queue_name, kind, outcome)
);
