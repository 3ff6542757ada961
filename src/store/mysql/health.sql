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
