-- The job statistics. A flush upserts its rows one statement each, in key
-- order, in one transaction; a fold locks the old rows and reads them, adds
-- their sums to the totals rows, and deletes exactly the rows it read, in
-- one transaction (under READ COMMITTED there are no gap locks, so a delete
-- by range could remove a row a late flush committed after the read).

-- name: add_deltas
-- Adds deltas to a row, creating it when missing. VALUES(col) is the
-- row proposed (MariaDB has no AS new alias; MySQL 8 deprecates
-- VALUES() but runs it).
INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    jobs = jobs + VALUES(jobs),
    wait_ms = wait_ms + VALUES(wait_ms),
    run_ms = run_ms + VALUES(run_ms)

-- name: fold/cutoff
-- The cutoff, ? microseconds ago, read once so every statement of the
-- fold agrees on it.
SELECT (UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND) AS t

-- name: fold/lock
-- ?1: the totals bucket; ?2: the cutoff. Locked in primary key order.
SELECT bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms FROM solidq_job_stats
WHERE bucket > ? AND bucket < ?
ORDER BY bucket, queue_name, kind, outcome
FOR UPDATE

-- name: fold/delete
-- The rows read, as a JSON array of [bucket, queue, kind, outcome]
-- (the bucket as YYYY-MM-DD HH:MM:SS.ffffff), each joined to its row
-- by primary key (STRAIGHT_JOIN: the list first).
DELETE s FROM JSON_TABLE(?, '$[*]' COLUMNS (bucket VARCHAR(32) PATH '$[0]',
                                          queue_name VARCHAR(255) PATH '$[1]',
                                          kind VARCHAR(255) PATH '$[2]',
                                          outcome VARCHAR(32) PATH '$[3]')) AS d
STRAIGHT_JOIN solidq_job_stats s
  ON s.bucket = CAST(d.bucket AS DATETIME(6)) AND s.queue_name = d.queue_name
 AND s.kind = d.kind AND s.outcome = d.outcome
