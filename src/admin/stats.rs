//! Job statistics, for metrics and charts: per (queue, kind, outcome),
//! per minute ([`Queue::job_series`]) and in total ([`Queue::job_totals`]).
//! What is counted, when it is written and how long it is kept: see
//! [`JobCount`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::Queue;
use crate::types::Result;

impl JobCount {
    /// The outcomes counted, as [`JobCount::outcome`] and
    /// [`StatsBucket::outcome`] spell them (see [`JobCount`]).
    /// A later version may add to them.
    pub const OUTCOMES: [&str; 6] = [
        "succeeded",
        "failed",
        "retried",
        "snoozed",
        "discarded",
        "stalled",
    ];
}

/// Attempts of one queue and kind that ended one way, summed over all
/// time, from [`Queue::job_totals`].
///
/// **What is counted.** Every attempt a worker recorded, by how it ended
/// (see [`JobCount::OUTCOMES`]): `succeeded`; `failed` (for good: no attempts
/// left or not retryable, including an at-most-once job whose worker
/// stopped or was killed while it ran); `retried` (failed, retry
/// scheduled); `snoozed` (handed back without spending an attempt);
/// `discarded` (cancelled by an operator); `stalled` (its process died
/// while it ran, whether the job went back to ready or failed past its
/// `max_stalled_count`). Jobs handed back unstarted, or released at an
/// orderly stop, are not counted: their next attempt is. A job's `wait` is
/// from when it became due (enqueued, its run time, its retry time, or its
/// release after a stall) to when the attempt started; its `run` is how
/// long the attempt ran. Stalls carry no times: the dead process took them
/// with it. Times are summed in milliseconds; divide by `jobs` for means.
///
/// **When it is written.** A worker counts outcomes in memory as it
/// records them and adds them to the table (one upsert adding deltas)
/// after each successful heartbeat and when it stops, so a row lags by up
/// to a heartbeat interval. A worker that crashes loses the counts of at
/// most its last interval (and one that cannot reach the database keeps
/// them until it can, or until it stops): the statistics are for metrics
/// and charts, and the jobs table stays the truth. Stalls are counted by
/// whichever process releases the dead one's jobs, in the same
/// transaction, and are never lost. Buckets are minutes of the backend's
/// clock (the database's on PostgreSQL; the host's on SQLite): the minute
/// an attempt ended.
///
/// **Retention.** Per-minute rows are kept for
/// [`JOB_STATS_RETENTION`](crate::config::JOB_STATS_RETENTION) (a day);
/// the cleaner (supervisors and standalone workers run it every heartbeat
/// interval) then adds them to one totals row per queue, kind and outcome
/// and deletes them, in one transaction. Sums over the table, which
/// [`Queue::job_totals`] returns, therefore never decrease: they can back
/// Prometheus counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCount {
    /// The jobs' queue.
    pub queue: String,
    /// The jobs' kind.
    pub kind: String,
    /// How the attempts ended: one of [`JobCount::OUTCOMES`].
    pub outcome: String,
    /// How many attempts.
    pub jobs: u64,
    /// Their waits from due to start, summed, in milliseconds.
    pub wait_ms: u64,
    /// Their run times, summed, in milliseconds.
    pub run_ms: u64,
}

/// Attempts of one queue and kind that ended one way within one minute,
/// from [`Queue::job_series`] (see [`JobCount`] for what is counted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatsBucket {
    /// The start of the minute (the backend's clock).
    pub bucket: DateTime<Utc>,
    /// The jobs' queue.
    pub queue: String,
    /// The jobs' kind.
    pub kind: String,
    /// How the attempts ended: one of [`JobCount::OUTCOMES`].
    pub outcome: String,
    /// How many attempts.
    pub jobs: u64,
    /// Their waits from due to start, summed, in milliseconds.
    pub wait_ms: u64,
    /// Their run times, summed, in milliseconds.
    pub run_ms: u64,
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Queue {
    /// Every (queue, kind, outcome) ever counted, with its sums over all
    /// time, by queue, kind and outcome: monotonic counters, fit for
    /// Prometheus (`solidq_jobs_total{queue,kind,outcome}` from
    /// [`JobCount::jobs`], `_seconds_total` from the sums). Lags by up to a
    /// worker heartbeat interval (see [`JobCount`]).
    pub fn job_totals(&self) -> Result<Vec<JobCount>> {
        Ok(self
            .store()
            .job_stats_totals()?
            .into_iter()
            .map(|row| JobCount {
                queue: row.queue_name,
                kind: row.kind,
                outcome: row.outcome,
                jobs: unsigned(row.jobs),
                wait_ms: unsigned(row.wait_ms),
                run_ms: unsigned(row.run_ms),
            })
            .collect())
    }

    /// The per-minute counts from the minute `since` falls in, by minute,
    /// queue, kind and outcome; minutes with nothing counted are absent.
    /// Minutes older than the retention (a day) have been folded into the
    /// totals and are no longer listed. A chart of the last hour is
    /// `job_series(Utc::now() - 1h)`; the current minute is still filling.
    pub fn job_series(&self, since: DateTime<Utc>) -> Result<Vec<StatsBucket>> {
        Ok(self
            .store()
            .job_stats_since(since.naive_utc())?
            .into_iter()
            .map(|row| StatsBucket {
                bucket: row.bucket.and_utc(),
                queue: row.queue_name,
                kind: row.kind,
                outcome: row.outcome,
                jobs: unsigned(row.jobs),
                wait_ms: unsigned(row.wait_ms),
                run_ms: unsigned(row.run_ms),
            })
            .collect())
    }

    /// Folds the per-minute rows older than `older_than` (the backend's
    /// clock) into the totals, deleting them in the same transaction, so
    /// [`Queue::job_totals`] is unchanged; returns how many rows were
    /// folded. The cleaner does this every round with
    /// [`JOB_STATS_RETENTION`](crate::config::JOB_STATS_RETENTION).
    pub fn fold_job_stats(&self, older_than: Duration) -> Result<u64> {
        self.store().job_stats_fold(older_than)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_published_outcomes_are_those_stored() {
        let stored: Vec<&str> = crate::store::Counted::ALL
            .iter()
            .map(|c| c.as_str())
            .collect();
        assert_eq!(stored, super::JobCount::OUTCOMES);
    }
}
