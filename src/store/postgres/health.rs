//! PostgreSQL's side of database health, all from the catalogs and the
//! statistics views, so it costs the same whatever the tables hold: rows
//! are `pg_stat_user_tables.n_live_tup` (kept by every insert and delete),
//! or `pg_class.reltuples` (the last VACUUM or ANALYZE) when the
//! statistics have seen nothing since they were reset (a crash resets
//! them); sizes are `pg_total_relation_size` (table, indexes, TOAST).

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::{Cached, HealthFacts, PostgresFacts, TableFacts};

/// solidq's tables in the current schema. Times are `timestamptz`: shown
/// in UTC, the session's zone, as `timestamp`.
const TABLES: &str = "\
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
  AND c.relname LIKE 'solidq\\_%'
ORDER BY c.relname";

const DATABASE: &str = "\
SELECT current_schema()::text AS schema, pg_database_size(current_database()) AS bytes,
       current_setting('server_version') AS version, LOCALTIMESTAMP AS now";

#[derive(QueryableByName)]
struct TableRow {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    rows: i64,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    dead_rows: Option<i64>,
    #[diesel(sql_type = Nullable<Timestamp>)]
    last_vacuum: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Timestamp>)]
    last_autovacuum: Option<NaiveDateTime>,
}

#[derive(QueryableByName)]
struct DatabaseRow {
    #[diesel(sql_type = Text)]
    schema: String,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
    #[diesel(sql_type = Text)]
    version: String,
    #[diesel(sql_type = Timestamp)]
    now: NaiveDateTime,
}

pub(super) fn database_health(conn: &mut PgConnection) -> QueryResult<HealthFacts> {
    let tables: Vec<TableRow> = Cached(sql_query(TABLES)).load(conn)?;
    let database: DatabaseRow = Cached(sql_query(DATABASE)).get_result(conn)?;
    Ok(HealthFacts {
        tables: tables
            .into_iter()
            .map(|t| TableFacts {
                name: t.name,
                rows: t.rows,
                rows_exact: false,
                bytes: Some(t.bytes),
                dead_rows: Some(t.dead_rows.unwrap_or(0)),
                last_vacuum: t.last_vacuum,
                last_autovacuum: t.last_autovacuum,
            })
            .collect(),
        sqlite: None,
        postgres: Some(PostgresFacts {
            schema: database.schema,
            database_bytes: database.bytes,
            server_version: database.version,
        }),
        now: database.now,
    })
}
