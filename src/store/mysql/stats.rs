//! MySQL statements of the job statistics. A flush upserts its rows one
//! statement each, in key order, in one transaction (a handful of rows per
//! heartbeat; two workers adding to the same keys lock them in the same
//! order, so they queue instead of deadlocking). A fold locks the old rows
//! and reads them, adds their sums to the totals rows, and deletes exactly
//! the rows it read, in one transaction: under `READ COMMITTED` there are
//! no gap locks, so a delete by range could remove a row a late flush
//! committed after the read, uncounted (PostgreSQL deletes and adds in one
//! statement instead).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl};

use super::write_tx;
use crate::store::named::named;
use crate::store::{Cached, StatsDelta, StatsDriver, TOTALS_BUCKET, micros, prepared};

const SQL: &str = include_str!("stats.sql");
const ADD: &str = named(SQL, "add_deltas");
const CUTOFF: &str = named(SQL, "fold/cutoff");
const LOCK_OLD: &str = named(SQL, "fold/lock");
const DELETE_READ: &str = named(SQL, "fold/delete");

#[derive(QueryableByName)]
struct Cutoff {
    #[diesel(sql_type = Timestamp)]
    t: NaiveDateTime,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Timestamp)]
    bucket: NaiveDateTime,
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    outcome: String,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
    #[diesel(sql_type = BigInt)]
    wait_ms: i64,
    #[diesel(sql_type = BigInt)]
    run_ms: i64,
}

fn add(
    conn: &mut MysqlConnection,
    bucket: NaiveDateTime,
    (queue_name, kind, outcome): (&str, &str, &str),
    (jobs, wait_ms, run_ms): (i64, i64, i64),
) -> QueryResult<()> {
    Cached(
        prepared(ADD)
            .bind::<Timestamp, _>(bucket)
            .bind::<Text, _>(queue_name)
            .bind::<Text, _>(kind)
            .bind::<Text, _>(outcome)
            .bind::<BigInt, _>(jobs)
            .bind::<BigInt, _>(wait_ms)
            .bind::<BigInt, _>(run_ms),
    )
    .execute(conn)
    .map(drop)
}

impl StatsDriver for MysqlConnection {
    /// One upsert per row, in key order, in one transaction (a savepoint
    /// inside the caller's).
    fn job_stats_add(&mut self, rows: &[&StatsDelta]) -> QueryResult<()> {
        let conn = self;
        let mut rows = rows.to_vec();
        rows.sort_by(|a, b| {
            (a.bucket, &a.queue_name, &a.kind, a.outcome.as_str()).cmp(&(
                b.bucket,
                &b.queue_name,
                &b.kind,
                b.outcome.as_str(),
            ))
        });
        write_tx(conn, |conn| {
            for row in rows {
                add(
                    conn,
                    row.bucket,
                    (&row.queue_name, &row.kind, row.outcome.as_str()),
                    (row.jobs, row.wait_ms, row.run_ms),
                )?;
            }
            Ok(())
        })
    }

    /// In one transaction: the cutoff, the old rows locked and read, their
    /// sums added to the totals rows (in key order), and those rows deleted.
    fn job_stats_fold(&mut self, older_than: Duration) -> QueryResult<usize> {
        let conn = self;
        write_tx(conn, |conn| {
            let cutoff: Cutoff =
                Cached(prepared(CUTOFF).bind::<BigInt, _>(micros(older_than))).get_result(conn)?;
            let rows: Vec<Row> = Cached(
                prepared(LOCK_OLD)
                    .bind::<Timestamp, _>(TOTALS_BUCKET)
                    .bind::<Timestamp, _>(cutoff.t),
            )
            .load(conn)?;
            if rows.is_empty() {
                return Ok(0);
            }
            let mut sums: BTreeMap<(&str, &str, &str), (i64, i64, i64)> = BTreeMap::new();
            for row in &rows {
                let sum = sums
                    .entry((&row.queue_name, &row.kind, &row.outcome))
                    .or_default();
                sum.0 += row.jobs;
                sum.1 += row.wait_ms;
                sum.2 += row.run_ms;
            }
            for (key, sum) in sums {
                add(conn, TOTALS_BUCKET, key, sum)?;
            }
            let read: Vec<(String, &str, &str, &str)> = rows
                .iter()
                .map(|r| {
                    (
                        r.bucket.format("%F %T%.6f").to_string(),
                        r.queue_name.as_str(),
                        r.kind.as_str(),
                        r.outcome.as_str(),
                    )
                })
                .collect();
            Cached(
                prepared(DELETE_READ)
                    .bind::<Text, _>(serde_json::to_string(&read).expect("rows serialize")),
            )
            .execute(conn)?;
            Ok(rows.len())
        })
    }
}
