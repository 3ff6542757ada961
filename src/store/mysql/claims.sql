-- Claims: recording that jobs claimed ahead have started, dispatching due
-- scheduled jobs to ready, the fence that keeps a claim its process's,
-- releasing the claims of a process or of processes gone, and finishing
-- claimed jobs. Ids come as a JSON array bound as one ?, read as the table
-- ids (JSON_TABLE); times are the database's (UTC_TIMESTAMP(6)). MySQL has
-- no DELETE … RETURNING: rows are locked and read first (FOR UPDATE), then
-- changed by the list of the ids locked, which deletes and updates join
-- (STRAIGHT_JOIN: the list first, then each row by primary key). The claim
-- itself is composed from the worker's queue list (ClaimQuery) and its
-- other statements are mod.rs's.

-- name: claimed_mark_started
-- The claims among ? (jobs claimed ahead) of process ? recorded as
-- started.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
SET c.started_at = UTC_TIMESTAMP(6)
WHERE c.process_id = ? AND c.started_at IS NULL

-- name: claimed_mark_unstarted
-- The claims among ? of process ? recorded as not started (a job to run
-- alone, waiting for the process's other jobs to end).
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
SET c.started_at = NULL
WHERE c.process_id = ? AND c.started_at IS NOT NULL

-- name: scheduled_dispatch/find_due
-- Up to ? scheduled jobs due and under no concurrency limit, in the order
-- they fell due: a look without locks, so that an idle dispatcher opens no
-- transaction.
SELECT job_id, queue_name FROM solidq_scheduled_executions
WHERE scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NULL
ORDER BY scheduled_at, priority, job_id LIMIT ?

-- name: scheduled_dispatch/lock_due
-- The same, locked: several dispatchers take disjoint batches.
SELECT job_id, queue_name FROM solidq_scheduled_executions
WHERE scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NULL
ORDER BY scheduled_at, priority, job_id LIMIT ? FOR UPDATE SKIP LOCKED

-- name: scheduled_dispatch/ready
-- Their ready rows (?, the ids locked), created now, placed for fair
-- share: the text of store::fair's READY_COLUMNS and ready_rows_sql("j",
-- "UTC_TIMESTAMP(6)", "FROM <ids> STRAIGHT_JOIN solidq_jobs j ON j.id =
-- ids.value").
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
SELECT id, queue_name, priority, created_at, fairness_key,
       CASE WHEN fairness_key IS NULL THEN id
            ELSE MAX(first) OVER (PARTITION BY queue_name, priority, fairness_key) + nth - 1 END,
       kind, delivery
FROM (SELECT s.id, s.queue_name, s.priority, s.created_at, s.fairness_key, s.nth,
             CASE WHEN s.fairness_key IS NOT NULL AND s.nth = 1 THEN
                 COALESCE((SELECT MAX(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = s.queue_name AND f.priority = s.priority
                             AND f.fairness_key = s.fairness_key) + 1,
                          (SELECT MIN(f.position) FROM solidq_ready_executions f
                           WHERE f.queue_name = s.queue_name AND f.priority = s.priority),
                          s.id)
             END AS first,
             s.kind, s.delivery
      FROM (SELECT j.id AS id, j.queue_name AS queue_name,
                   j.priority AS priority, UTC_TIMESTAMP(6) AS created_at,
                   j.fairness_key AS fairness_key,
                   j.kind AS kind, j.delivery AS delivery,
                   ROW_NUMBER() OVER (PARTITION BY j.queue_name, j.priority, j.fairness_key ORDER BY j.id) AS nth
            FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
            STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value) s) b

-- name: scheduled_dispatch/delete
-- Their scheduled rows (?), deleted.
DELETE x FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value

-- name: claimed_held
-- The jobs of ? whose claim process ? holds.
SELECT c.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
WHERE c.process_id = ?

-- name: claimed_delete_fenced/lock
-- The fence's read: the claims among ? that process ? holds, locked.
SELECT c.job_id AS id FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
WHERE c.process_id = ?
ORDER BY c.job_id FOR UPDATE

-- name: claimed_delete_fenced/delete
-- The claims locked (?), deleted.
DELETE c FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value

-- name: claimed_delete_by_process/lock
-- The claims of process ?, with their jobs' facts, locked.
SELECT j.id, c.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count, j.max_stalled_count,
       j.concurrency_key, j.options, c.started_at IS NOT NULL AS started
FROM solidq_claimed_executions c JOIN solidq_jobs j ON j.id = c.job_id
WHERE c.process_id = ? ORDER BY j.id FOR UPDATE

-- name: claimed_delete_by_process/delete
-- The claims locked (?), deleted.
DELETE c FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value

-- name: claimed_delete_orphans/lock
-- Up to ? claims whose process row is gone, locked (skipping those another
-- cleaner holds).
SELECT c.job_id AS id FROM solidq_claimed_executions c
WHERE NOT EXISTS (SELECT 1 FROM solidq_processes p WHERE p.id = c.process_id)
ORDER BY c.job_id LIMIT ? FOR UPDATE SKIP LOCKED

-- name: claimed_delete_orphans/jobs
-- Those claims (?), with their jobs' facts.
SELECT j.id, c.process_id, j.kind, j.queue_name, j.delivery, j.stalled_count,
       j.max_stalled_count, j.concurrency_key, j.options,
       c.started_at IS NOT NULL AS started
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
STRAIGHT_JOIN solidq_jobs j ON j.id = c.job_id ORDER BY j.id

-- name: claimed_delete_orphans/delete
-- Those claims (?), deleted.
DELETE c FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value

-- name: jobs_succeed_fenced/claims
-- The finish's fence, in one statement: the claims among ? (ids in
-- ascending order, the order every fence locks them in) that process ?
-- holds, deleted without a locking read first. The count of rows deleted
-- tells whether every one was held, as nearly always.
DELETE c FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
WHERE c.process_id = ?

-- name: jobs_succeed_fenced/group
-- Finishes a group of fenced jobs without results and with the same
-- retention: the first ? is a JSON array of [id, microseconds since the
-- attempt started], the second the retention in microseconds.
UPDATE JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$[0]', ago_us BIGINT PATH '$[1]')) AS ids
STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
SET j.finished_at = UTC_TIMESTAMP(6), j.expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND),
    j.started_at = (UTC_TIMESTAMP(6) - INTERVAL ids.ago_us MICROSECOND),
    j.attempts = j.attempts + 1, j.updated_at = UTC_TIMESTAMP(6)

-- name: jobs_succeed_fenced/with_result
-- Finishes one fenced job with its result: binds its retention in
-- microseconds, the result, microseconds since its attempt started, its
-- id.
UPDATE solidq_jobs SET finished_at = UTC_TIMESTAMP(6),
       expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), result = ?,
       started_at = (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND),
       attempts = attempts + 1, updated_at = UTC_TIMESTAMP(6) WHERE id = ?

-- name: ready_since
-- Whether a job with an id above ? is ready, on any queue: a range of the
-- ready table's primary key from that id, so under a transaction held
-- open elsewhere it walks only the entries of jobs enqueued since, not
-- every row claimed since the hold began. MySQL's listener reads it in
-- the moments after a change of its signature (`store::listener`,
-- `SECOND_LOOKS`); the other backends' listeners are told of new jobs or
-- watch the file.
SELECT CAST(EXISTS (SELECT 1 FROM solidq_ready_executions WHERE job_id > ?) AS SIGNED) AS v
