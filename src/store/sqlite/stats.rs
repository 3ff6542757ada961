//! SQLite statements of the job statistics. A flush upserts its rows one
//! statement each inside one write transaction (a handful of rows per
//! heartbeat); a fold looks first with a plain read, so a maintenance
//! round with nothing to fold takes no write lock, then adds the old rows
//! to the totals rows and deletes them under one `BEGIN IMMEDIATE`.

use std::time::Duration;

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use super::{minus, write_tx};
use crate::store::{Cached, StatsDelta, TOTALS_BUCKET, utc_now};

const ADD: &str = "\
INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
    jobs = jobs + excluded.jobs,
    wait_ms = wait_ms + excluded.wait_ms,
    run_ms = run_ms + excluded.run_ms";

/// `?1`: the totals bucket; `?2`: the cutoff.
const ANY_OLD: &str = "\
SELECT EXISTS (SELECT 1 FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2) AS v";

/// The `WHERE` keeps SQLite from reading `ON CONFLICT` as a join's `ON`.
const FOLD_ADD: &str = "\
INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
SELECT ?1, queue_name, kind, outcome, sum(jobs), sum(wait_ms), sum(run_ms)
FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2
GROUP BY queue_name, kind, outcome
ON CONFLICT (bucket, queue_name, kind, outcome) DO UPDATE SET
    jobs = jobs + excluded.jobs,
    wait_ms = wait_ms + excluded.wait_ms,
    run_ms = run_ms + excluded.run_ms";

const FOLD_DELETE: &str = "DELETE FROM solidq_job_stats WHERE bucket > ?1 AND bucket < ?2";

#[derive(QueryableByName)]
struct Flag {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    v: bool,
}

pub(super) fn job_stats_add(conn: &mut SqliteConnection, rows: &[&StatsDelta]) -> QueryResult<()> {
    write_tx(conn, |conn| {
        for row in rows {
            Cached(
                sql_query(ADD)
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

pub(super) fn job_stats_fold(
    conn: &mut SqliteConnection,
    older_than: Duration,
) -> QueryResult<usize> {
    let cutoff = minus(utc_now(), older_than);
    let any: Flag = Cached(
        sql_query(ANY_OLD)
            .bind::<Timestamp, _>(TOTALS_BUCKET)
            .bind::<Timestamp, _>(cutoff),
    )
    .get_result(conn)?;
    if !any.v {
        return Ok(0);
    }
    write_tx(conn, |conn| {
        Cached(
            sql_query(FOLD_ADD)
                .bind::<Timestamp, _>(TOTALS_BUCKET)
                .bind::<Timestamp, _>(cutoff),
        )
        .execute(conn)?;
        Cached(
            sql_query(FOLD_DELETE)
                .bind::<Timestamp, _>(TOTALS_BUCKET)
                .bind::<Timestamp, _>(cutoff),
        )
        .execute(conn)
    })
}
