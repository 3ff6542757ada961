//! SQLite statements of the job statistics. A flush upserts its rows one
//! statement each inside one write transaction (a handful of rows per
//! heartbeat); a fold looks first with a plain read, so a maintenance
//! round with nothing to fold takes no write lock, then adds the old rows
//! to the totals rows and deletes them under one `BEGIN IMMEDIATE`.

use std::time::Duration;

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection};

use super::{minus, write_tx};
use crate::store::named::named;
use crate::store::{Cached, StatsDelta, StatsDriver, TOTALS_BUCKET, prepared, utc_now};

const SQL: &str = include_str!("stats.sql");
const ADD: &str = named(SQL, "add_deltas");
const ANY_OLD: &str = named(SQL, "fold/any_old");
const FOLD_ADD: &str = named(SQL, "fold/add");
const FOLD_DELETE: &str = named(SQL, "fold/delete");

#[derive(QueryableByName)]
struct Flag {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    v: bool,
}

impl StatsDriver for SqliteConnection {
    fn job_stats_add(&mut self, rows: &[&StatsDelta]) -> QueryResult<()> {
        let conn = self;
        write_tx(conn, |conn| {
            for row in rows {
                Cached(
                    prepared(ADD)
                        .bind::<Timestamp, _>(row.bucket)
                        .bind::<Text, _>(&row.queue_name)
                        .bind::<Text, _>(&row.kind)
                        .bind::<Text, _>(row.outcome.as_str())
                        .bind::<BigInt, _>(row.jobs)
                        .bind::<BigInt, _>(row.wait_ms)
                        .bind::<BigInt, _>(row.run_ms),
                )
                .execute(conn)?;
            }
            Ok(())
        })
    }

    fn job_stats_fold(&mut self, older_than: Duration) -> QueryResult<usize> {
        let conn = self;
        let cutoff = minus(utc_now(), older_than);
        let any: Flag = Cached(
            prepared(ANY_OLD)
                .bind::<Timestamp, _>(TOTALS_BUCKET)
                .bind::<Timestamp, _>(cutoff),
        )
        .get_result(conn)?;
        if !any.v {
            return Ok(0);
        }
        write_tx(conn, |conn| {
            Cached(
                prepared(FOLD_ADD)
                    .bind::<Timestamp, _>(TOTALS_BUCKET)
                    .bind::<Timestamp, _>(cutoff),
            )
            .execute(conn)?;
            Cached(
                prepared(FOLD_DELETE)
                    .bind::<Timestamp, _>(TOTALS_BUCKET)
                    .bind::<Timestamp, _>(cutoff),
            )
            .execute(conn)
        })
    }
}
