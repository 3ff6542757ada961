//! Job statistics: counts of attempts' outcomes per minute, queue and kind,
//! with the summed wait and run times, for metrics and charts.
//!
//! Rows are only ever added to (an upsert adding deltas) and folded: rows
//! older than the retention are added to one totals row per (queue, kind,
//! outcome) at [`TOTALS_BUCKET`] in the same transaction that deletes them,
//! so a sum over the whole table never decreases.

use std::time::Duration;

use chrono::{NaiveDateTime, Timelike};
use diesel::prelude::*;

use super::schema::solidq_job_stats as stats;
use super::{Outcome, Store};
use crate::types::Result;

/// The bucket of the totals rows that old rows are folded into:
/// 1970-01-01 00:00:00.
pub(crate) const TOTALS_BUCKET: NaiveDateTime = chrono::DateTime::UNIX_EPOCH.naive_utc();

/// How an attempt ended, as the statistics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Counted {
    Succeeded,
    /// Failed for good (no attempts left, not retryable, or an at-most-once
    /// job whose worker stopped while it ran).
    Failed,
    /// Failed with a retry scheduled.
    Retried,
    /// Handed back without spending an attempt.
    Snoozed,
    /// Cancelled by an operator and discarded.
    Discarded,
    /// Its process died while it ran (released, or failed past its
    /// `max_stalled_count`).
    Stalled,
}

impl Counted {
    /// Every outcome, in the order listed.
    #[cfg(test)]
    pub(crate) const ALL: [Counted; 6] = [
        Counted::Succeeded,
        Counted::Failed,
        Counted::Retried,
        Counted::Snoozed,
        Counted::Discarded,
        Counted::Stalled,
    ];

    /// As stored.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Counted::Succeeded => "succeeded",
            Counted::Failed => "failed",
            Counted::Retried => "retried",
            Counted::Snoozed => "snoozed",
            Counted::Discarded => "discarded",
            Counted::Stalled => "stalled",
        }
    }

    /// What a worker's outcome counts as.
    pub(crate) fn of(outcome: &Outcome) -> Counted {
        match outcome {
            Outcome::Succeeded { .. } => Counted::Succeeded,
            Outcome::Retry { .. } => Counted::Retried,
            Outcome::Failed { .. } => Counted::Failed,
            Outcome::Snoozed { .. } => Counted::Snoozed,
            Outcome::Discarded { .. } => Counted::Discarded,
        }
    }
}

/// Adds one job per entry of `jobs` (queue, kind, outcome) to the
/// statistics at the current minute of the database's clock, with no wait
/// or run time, in the caller's transaction: outcomes recorded outside a
/// worker's tally (a dead process's releases, an operator's discards of
/// waiting jobs), so the statistics keep every queue and kind of a job
/// that ended.
pub(crate) fn count_now(
    d: &mut dyn super::Driver,
    jobs: &[(&str, &str, Counted)],
) -> QueryResult<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let bucket = minute_of(d.db_now()?);
    let mut deltas: Vec<StatsDelta> = Vec::new();
    for &(queue_name, kind, outcome) in jobs {
        match deltas.iter_mut().find(|delta| {
            delta.outcome == outcome && delta.queue_name == queue_name && delta.kind == kind
        }) {
            Some(delta) => delta.jobs += 1,
            None => deltas.push(StatsDelta {
                bucket,
                queue_name: queue_name.to_string(),
                kind: kind.to_string(),
                outcome,
                jobs: 1,
                wait_ms: 0,
                run_ms: 0,
            }),
        }
    }
    // Key order, as every flush writes: no deadlock with a worker's flush.
    deltas.sort_by(|a, b| {
        (&a.queue_name, &a.kind, a.outcome.as_str()).cmp(&(
            &b.queue_name,
            &b.kind,
            b.outcome.as_str(),
        ))
    });
    d.job_stats_add(&deltas.iter().collect::<Vec<_>>())
}

/// Counts to add to one row of the statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatsDelta {
    /// The start of a minute.
    pub bucket: NaiveDateTime,
    pub queue_name: String,
    pub kind: String,
    pub outcome: Counted,
    pub jobs: i64,
    pub wait_ms: i64,
    pub run_ms: i64,
}

/// A row of the statistics.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName, Queryable)]
pub(crate) struct StatsRow {
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub bucket: NaiveDateTime,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub outcome: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub jobs: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub wait_ms: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub run_ms: i64,
}

/// The sums of a (queue, kind, outcome) over every row.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub(crate) struct TotalsRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub outcome: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub jobs: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub wait_ms: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub run_ms: i64,
}

/// The start of the minute `t` falls in.
pub(crate) fn minute_of(t: NaiveDateTime) -> NaiveDateTime {
    t.with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(t)
}

/// Sums over every row, the totals rows included (bucket
/// [`TOTALS_BUCKET`]), with `{INT}` the backend's 64-bit integer type
/// (a sum of BIGINTs is NUMERIC or DECIMAL). No parameters.
const TOTALS: &str = "\
SELECT queue_name, kind, outcome,
       CAST(sum(jobs) AS {INT}) AS jobs, CAST(sum(wait_ms) AS {INT}) AS wait_ms,
       CAST(sum(run_ms) AS {INT}) AS run_ms
FROM solidq_job_stats GROUP BY queue_name, kind, outcome ORDER BY queue_name, kind, outcome";

impl Store {
    /// Adds `rows` to the statistics in one transaction (one statement on
    /// PostgreSQL). Rows are written in key order, so flushes of several
    /// workers never deadlock on each other's rows.
    pub(crate) fn job_stats_add(&self, rows: &[StatsDelta]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut sorted: Vec<&StatsDelta> = rows.iter().collect();
        sorted.sort_by(|a, b| {
            (a.bucket, &a.queue_name, &a.kind, a.outcome.as_str()).cmp(&(
                b.bucket,
                &b.queue_name,
                &b.kind,
                b.outcome.as_str(),
            ))
        });
        self.with_driver("job_stats_add", |d| d.job_stats_add(&sorted))
    }

    /// Folds the rows whose minute ended more than `older_than` ago (the
    /// backend's clock) into the totals rows, deleting them, in one
    /// transaction; returns how many rows were folded.
    pub(crate) fn job_stats_fold(&self, older_than: Duration) -> Result<u64> {
        self.with_driver("job_stats_fold", |d| d.job_stats_fold(older_than))
            .map(|n| n as u64)
    }

    /// The sums per (queue, kind, outcome) over every row, by queue, kind
    /// and outcome.
    pub(crate) fn job_stats_totals(&self) -> Result<Vec<TotalsRow>> {
        let int = match self.backend() {
            crate::types::Backend::Mysql => "SIGNED",
            crate::types::Backend::Postgres | crate::types::Backend::Sqlite => "BIGINT",
        };
        let sql = TOTALS.replace("{INT}", int);
        self.with_read("job_stats_totals", |conn| {
            diesel::sql_query(&sql).load(conn)
        })
    }

    /// The rows of the minutes from the one `since` falls in, by bucket,
    /// queue, kind and outcome (never the totals rows).
    pub(crate) fn job_stats_since(&self, since: NaiveDateTime) -> Result<Vec<StatsRow>> {
        let from = minute_of(since).max(TOTALS_BUCKET + chrono::Duration::minutes(1));
        self.with_read("job_stats_since", |conn| {
            stats::table
                .filter(stats::bucket.ge(from))
                .order((
                    stats::bucket,
                    stats::queue_name,
                    stats::kind,
                    stats::outcome,
                ))
                .select((
                    stats::bucket,
                    stats::queue_name,
                    stats::kind,
                    stats::outcome,
                    stats::jobs,
                    stats::wait_ms,
                    stats::run_ms,
                ))
                .load(conn)
        })
    }
}
