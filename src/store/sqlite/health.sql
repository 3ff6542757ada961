-- Database health: the file's pages, solidq's tables, their sizes (dbstat)
-- and the row counts ANALYZE recorded. The exact count of a table's rows
-- names the table, so it is built in health.rs.

-- name: tables
SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'solidq\_%' ESCAPE '\'
ORDER BY name

-- name: database
SELECT page_size, page_count, freelist_count,
       (SELECT file FROM pragma_database_list WHERE name = 'main') AS file
FROM pragma_page_size, pragma_page_count, pragma_freelist_count

-- name: tables/sizes
-- Bytes per b-tree, credited to the table it belongs to (an index to its
-- table); dbstat's aggregate mode gives one row per b-tree.
SELECT coalesce(m.tbl_name, d.name) AS tbl, d.pgsize AS bytes
FROM (SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE) AS d
LEFT JOIN sqlite_master AS m ON m.name = d.name

-- name: tables/has_stat1
-- Whether ANALYZE ever ran (it makes sqlite_stat1).
SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'

-- name: tables/analyzed_rows
-- What ANALYZE recorded for the table ?1: its own row and its indexes'.
SELECT stat FROM sqlite_stat1 WHERE tbl = ?1

-- name: horizon
-- SQLite keeps no old row versions for a reader: a long read holds back
-- the write-ahead log's checkpoint instead (its size is in health.rs's
-- facts). Nothing to report, in the columns the other backends fill.
SELECT CAST(NULL AS INTEGER) AS age_ms, CAST(NULL AS INTEGER) AS pid,
       CAST(NULL AS TEXT) AS holder, CAST(NULL AS TEXT) AS state,
       CAST(NULL AS INTEGER) AS backlog
