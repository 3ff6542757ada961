//! PostgreSQL's side of database health, all from the catalogs and the
//! statistics views, so it costs the same whatever the tables hold: rows
//! are `pg_stat_user_tables.n_live_tup` (kept by every insert and delete),
//! or `pg_class.reltuples` (the last VACUUM or ANALYZE) when the
//! statistics have seen nothing since they were reset (a crash resets
//! them); sizes are `pg_total_relation_size` (table, indexes, TOAST).

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::named::named;
use crate::store::{Cached, HealthFacts, PostgresFacts, TableFacts};

const SQL: &str = include_str!("health.sql");
const TABLES: &str = named(SQL, "tables");
const DATABASE: &str = named(SQL, "database");

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
