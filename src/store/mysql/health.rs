//! MySQL's side of database health, all from `information_schema.TABLES`,
//! so it costs the same whatever the tables hold: rows are InnoDB's
//! estimate (`TABLE_ROWS`, from sampled pages: never exact), sizes the
//! table's data and indexes (`DATA_LENGTH + INDEX_LENGTH`), for solidq's
//! tables in the connection's database (`DATABASE()`). No backend facts
//! beyond those (no vacuum: InnoDB purges on its own).

use chrono::NaiveDateTime;
use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::named::named;
use crate::store::{Cached, HealthDriver, HealthFacts, HorizonFacts, TableFacts, prepared};

const SQL: &str = include_str!("health.sql");
const HORIZON: &str = named(SQL, "horizon");
const TABLES: &str = named(SQL, "tables");
const NOW: &str = named(SQL, "database");

/// MySQL 8 serves `information_schema.TABLES` from a cache refreshed once
/// a day by default; 0 asks the engine each time (13 tables: cheap).
/// MariaDB has no such cache, nor the variable, and skips a comment
/// versioned for MySQL 8 (`/*!80000 … */`).
const FRESH_STATS: &str = "/*!80000 SET SESSION information_schema_stats_expiry = 0 */";

#[derive(QueryableByName)]
struct TableRow {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    rows: i64,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
}

#[derive(QueryableByName)]
struct Now {
    #[diesel(sql_type = Timestamp)]
    now: NaiveDateTime,
}

impl HealthDriver for MysqlConnection {
    /// Two reads (and on MySQL 8 a session setting, see [`FRESH_STATS`]): the
    /// tables, then the database's clock.
    fn database_health(&mut self) -> QueryResult<HealthFacts> {
        let conn = self;
        if let Err(error) = conn.batch_execute(FRESH_STATS) {
            log::debug!("table statistics may be cached: {error}");
        }
        let mut tables: Vec<TableRow> = Cached(prepared(TABLES)).load(conn)?;
        // By name byte for byte, as on the other backends (the catalog's
        // collation orders `solidq_jobs` before `solidq_job_stats`).
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        let now: Now = Cached(prepared(NOW)).get_result(conn)?;
        Ok(HealthFacts {
            tables: tables
                .into_iter()
                .map(|t| TableFacts {
                    name: t.name,
                    rows: t.rows,
                    rows_exact: false,
                    bytes: Some(t.bytes),
                    dead_rows: None,
                    last_vacuum: None,
                    last_autovacuum: None,
                })
                .collect(),
            sqlite: None,
            postgres: None,
            now: now.now,
        })
    }

    fn horizon(&mut self) -> QueryResult<HorizonFacts> {
        Cached(prepared(HORIZON)).get_result(self)
    }

    fn tables_tend(&mut self) -> QueryResult<Vec<String>> {
        // InnoDB purges deleted rows itself and keeps persistent statistics
        // current (innodb_stats_auto_recalc). What is left: the rows of the
        // claims' counter (`floor.rs`) below its highest.
        let trimmed = Cached(prepared(super::floor::TRIM)).execute(self)?;
        Ok(if trimmed > 0 {
            vec![format!("solidq_ready_below: {trimmed} rows deleted")]
        } else {
            Vec::new()
        })
    }
}
