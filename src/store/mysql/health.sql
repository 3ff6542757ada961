-- Database health from information_schema, and the database's clock.

-- name: tables
-- solidq's tables in the current database. The numbers are unsigned on
-- MySQL: cast to signed for BigInt.
SELECT TABLE_NAME AS name,
       CAST(COALESCE(TABLE_ROWS, 0) AS SIGNED) AS `rows`,
       CAST(COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) AS SIGNED) AS bytes
FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'
  AND TABLE_NAME LIKE 'solidq\_%'
ORDER BY TABLE_NAME

-- name: database
SELECT UTC_TIMESTAMP(6) AS now

-- name: horizon
-- The oldest InnoDB transaction another connection holds open (purge keeps
-- every row version deleted after its read view, server-wide), who holds
-- it, and InnoDB's history list length: the undo records not purged yet.
-- INNODB_TRX lists other users' transactions only with the PROCESS
-- privilege, and is served from a cache that InnoDB refreshes only after
-- 100 ms without a read of it. Only transactions of a session still in the
-- process list count: InnoDB's own (thread id 0, a DDL's dictionary work)
-- and one whose session has just ended have no holder to name, and the
-- row is whole or empty.
SELECT h.age_ms, h.pid, h.holder, h.state,
       (SELECT CAST(m.`COUNT` AS SIGNED) FROM information_schema.INNODB_METRICS m
        WHERE m.NAME = 'trx_rseg_history_len') AS backlog
FROM (SELECT 1 AS one) AS one
LEFT JOIN (
    SELECT CAST(TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) DIV 1000 AS SIGNED) AS age_ms,
           CAST(t.trx_mysql_thread_id AS SIGNED) AS pid,
           CONCAT(p.USER, '@', p.HOST) AS holder,
           p.COMMAND AS state
    FROM information_schema.INNODB_TRX t
    JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
    WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
    ORDER BY t.trx_started
    LIMIT 1
) AS h ON TRUE
