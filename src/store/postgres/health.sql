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

-- name: horizon
-- The oldest transaction another session of this database holds open with
-- a snapshot or a transaction id (either keeps VACUUM from removing rows
-- deleted after it began), and the dead rows of solidq's tables. Other
-- roles' sessions show only to superusers and pg_read_all_stats.
SELECT h.age_ms, h.pid, h.holder, h.state,
       (SELECT CAST(COALESCE(SUM(s.n_dead_tup), 0) AS BIGINT)
        FROM pg_stat_user_tables s
        WHERE s.schemaname = current_schema() AND s.relname LIKE 'solidq\_%') AS backlog
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start) * 1000 AS BIGINT) AS age_ms,
           CAST(a.pid AS BIGINT) AS pid,
           a.application_name::text AS holder,
           a.state::text AS state
    FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
      AND a.xact_start IS NOT NULL
      AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
    ORDER BY a.xact_start
    LIMIT 1
) AS h ON true

-- name: horizon/tend
-- The oldest transaction id any session, replication slot or prepared
-- transaction of the server holds back (as text: xid has no order, age()
-- does), and this database and schema: a VACUUM removes nothing that a
-- VACUUM of the same table under the same horizon left. Our own session's
-- snapshot is among them, so with nothing held it is new every round.
SELECT (SELECT x::text FROM (
            SELECT backend_xmin AS x FROM pg_stat_activity WHERE backend_xmin IS NOT NULL
            UNION ALL
            SELECT backend_xid FROM pg_stat_activity WHERE backend_xid IS NOT NULL
            UNION ALL
            SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
            UNION ALL
            SELECT transaction FROM pg_prepared_xacts
        ) AS h ORDER BY age(x) DESC LIMIT 1) AS horizon,
       current_database()::text || '.' || current_schema()::text AS place
