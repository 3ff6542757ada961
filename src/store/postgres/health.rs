//! PostgreSQL's side of database health, all from the catalogs and the
//! statistics views, so it costs the same whatever the tables hold: rows
//! are `pg_stat_user_tables.n_live_tup` (kept by every insert and delete),
//! or `pg_class.reltuples` (the last VACUUM or ANALYZE) when the
//! statistics have seen nothing since they were reset (a crash resets
//! them); sizes are `pg_total_relation_size` (table, indexes, TOAST).

use chrono::NaiveDateTime;
use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::named::named;
use crate::store::{
    Cached, HealthDriver, HealthFacts, HorizonFacts, PostgresFacts, TableFacts, prepared,
};

const SQL: &str = include_str!("health.sql");
const HORIZON: &str = named(SQL, "horizon");
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

impl HealthDriver for PgConnection {
    fn database_health(&mut self) -> QueryResult<HealthFacts> {
        let conn = self;
        let tables: Vec<TableRow> = Cached(prepared(TABLES)).load(conn)?;
        let database: DatabaseRow = Cached(prepared(DATABASE)).get_result(conn)?;
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

    fn horizon(&mut self) -> QueryResult<HorizonFacts> {
        Cached(prepared(HORIZON)).get_result(self)
    }

    fn tables_tend(&mut self) -> QueryResult<Vec<String>> {
        #[derive(QueryableByName)]
        struct TableStats {
            #[diesel(sql_type = Text)]
            relname: String,
            #[diesel(sql_type = BigInt)]
            live: i64,
            #[diesel(sql_type = BigInt)]
            dead: i64,
            #[diesel(sql_type = BigInt)]
            modified: i64,
        }
        let stats: Vec<TableStats> = Cached(prepared(
            "SELECT relname::text AS relname, n_live_tup AS live, n_dead_tup AS dead,
                    n_mod_since_analyze AS modified
             FROM pg_stat_user_tables
             WHERE schemaname = current_schema() AND relname LIKE 'solidq\\_%'",
        ))
        .load(self)?;
        let mut done = Vec::new();
        for t in stats {
            let hot = HOT_TABLES.contains(&t.relname.as_str());
            let vacuum = if hot {
                t.dead > 1_000 + t.live
            } else {
                t.dead > 10_000 + t.live / 5
            };
            let analyze = t.modified > 1_000 + t.live / 10;
            let action = match (vacuum, analyze) {
                (true, true) => "VACUUM (SKIP_LOCKED, ANALYZE)",
                (true, false) => "VACUUM (SKIP_LOCKED)",
                (false, true) => "ANALYZE (SKIP_LOCKED)",
                (false, false) => continue,
            };
            // Names come from the catalog and match solidq_*: safe to inline.
            self.batch_execute(&format!("{action} {}", t.relname))?;
            done.push(format!(
                "{action} {} ({} live, {} dead rows)",
                t.relname, t.live, t.dead
            ));
        }
        Ok(done)
    }
}

/// Tables every job passes through: small, with a row inserted and
/// deleted per job, so dead rows pile up fast.
const HOT_TABLES: [&str; 5] = [
    "solidq_ready_executions",
    "solidq_claimed_executions",
    "solidq_scheduled_executions",
    "solidq_blocked_executions",
    "solidq_processes",
];
