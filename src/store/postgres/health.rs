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
const TEND_HORIZON: &str = named(SQL, "horizon/tend");

/// The horizon (`horizon/tend`) under which this process last
/// vacuumed each table, by database, schema and table: a VACUUM under the
/// same horizon can remove nothing (every row dead since died after it),
/// and under a transaction held open for minutes it would read every
/// index entry of a hot table each round for nothing (PostgreSQL at 1,000
/// jobs/s through a ten-minute hold: 1.8 million dead rows behind it).
static VACUUMED_UNDER: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

#[derive(QueryableByName)]
struct TendHorizon {
    #[diesel(sql_type = Nullable<Text>)]
    horizon: Option<String>,
    #[diesel(sql_type = Text)]
    place: String,
}

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
        let TendHorizon { horizon, place } = Cached(prepared(TEND_HORIZON)).get_result(self)?;
        let mut done = Vec::new();
        for t in stats {
            let hot = HOT_TABLES.contains(&t.relname.as_str());
            let vacuum = if hot {
                t.dead > 1_000 + t.live
            } else {
                t.dead > 10_000 + t.live / 5
            };
            let analyze = t.modified > 1_000 + t.live / 10;
            let key = format!("{place}.{}", t.relname);
            let vacuumed_under = |h: &str| {
                VACUUMED_UNDER
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .iter()
                    .any(|(k, v)| *k == key && v == h)
            };
            let vacuum = vacuum && !horizon.as_deref().is_some_and(vacuumed_under);
            let action = match (vacuum, analyze) {
                (true, true) => "VACUUM (SKIP_LOCKED, ANALYZE)",
                (true, false) => "VACUUM (SKIP_LOCKED)",
                (false, true) => "ANALYZE (SKIP_LOCKED)",
                (false, false) => continue,
            };
            // Names come from the catalog and match solidq_*: safe to inline.
            self.batch_execute(&format!("{action} {}", t.relname))?;
            if let (true, Some(horizon)) = (vacuum, &horizon) {
                let mut under = VACUUMED_UNDER
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                under.retain(|(k, _)| *k != key);
                under.push((key.clone(), horizon.clone()));
            }
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use diesel::connection::SimpleConnection;
    use diesel::{PgConnection, QueryableByName, RunQueryDsl};

    use super::{TEND_HORIZON, TendHorizon};
    use crate::store::{HealthDriver, JobsDriver, NewJob};

    #[derive(QueryableByName)]
    struct Dead {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }

    fn horizon(conn: &mut PgConnection) -> Option<String> {
        diesel::sql_query(TEND_HORIZON)
            .get_result::<TendHorizon>(conn)
            .unwrap()
            .horizon
    }

    /// A hot table full of dead rows is vacuumed once under a transaction
    /// held open elsewhere; the rounds after, under the same horizon, skip
    /// it (that VACUUM could remove nothing); once the transaction ends,
    /// it is vacuumed again.
    #[test]
    fn a_vacuum_under_the_horizon_of_the_last_is_skipped() {
        let Some((mut conn, mut holder)) = super::super::migrated_under_a_held_snapshot() else {
            return;
        };
        let jobs: Vec<NewJob> = (0..500).map(|_| NewJob::plain("tend", "noop")).collect();
        for _ in 0..4 {
            conn.jobs_insert(&jobs, false).unwrap();
        }
        conn.batch_execute("DELETE FROM solidq_ready_executions")
            .unwrap();
        let vacuums_ready = |done: &[String]| {
            done.iter()
                .any(|d| d.starts_with("VACUUM") && d.contains("solidq_ready_executions "))
        };
        // The statistics arrive within a second or so.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let dead = diesel::sql_query(
                "SELECT n_dead_tup AS n FROM pg_stat_user_tables
                 WHERE schemaname = current_schema() AND relname = 'solidq_ready_executions'",
            )
            .get_result::<Dead>(&mut conn)
            .unwrap()
            .n;
            if dead >= 2_000 {
                break;
            }
            assert!(Instant::now() < deadline, "{dead} dead rows counted");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(vacuums_ready(&conn.tables_tend().unwrap()), "vacuumed once");
        // Under the same horizon (other tests' sessions may move it: look
        // again until one round ran under the one of the last VACUUM).
        let mut skipped = false;
        for _ in 0..50 {
            let before = horizon(&mut conn);
            let done = conn.tables_tend().unwrap();
            if before == horizon(&mut conn) && !vacuums_ready(&done) {
                skipped = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(skipped, "a VACUUM under the same horizon is skipped");
        holder.batch_execute("ROLLBACK").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !vacuums_ready(&conn.tables_tend().unwrap()) {
            assert!(
                Instant::now() < deadline,
                "vacuumed again once the transaction ended"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
