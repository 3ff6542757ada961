-- Database health, all from the catalogs and the statistics views, so it
-- costs the same whatever the tables hold.

-- name: tables
-- solidq's tables in the current schema. Times are timestamptz: shown
-- in UTC, the session's zone, as timestamp.
SELECT c.relname::text AS name,
       CASE WHEN s.relid IS NOT NULL
                 AND (s.n_live_tup > 0 OR s.n_dead_tup > 0 OR s.n_tup_ins > 0
                      OR s.n_tup_upd > 0 OR s.n_tup_del > 0 OR c.reltuples < 0)
            THEN s.n_live_tup
            ELSE greatest(c.reltuples, 0)::bigint END AS rows,
       pg_total_relation_size(c.oid) AS bytes,
       s.n_dead_tup AS dead_rows,
       (s.last_vacuum AT TIME ZONE 'UTC') AS last_vacuum,
       (s.last_autovacuum AT TIME ZONE 'UTC') AS last_autovacuum
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
  AND c.relname LIKE 'solidq\_%'
ORDER BY c.relname

-- name: database
SELECT current_schema()::text AS schema, pg_database_size(current_database()) AS bytes,
current_setting('server_version') AS version, LOCALTIMESTAMP AS now
