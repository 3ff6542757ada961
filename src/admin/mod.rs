//! What an operator does through the library (and the CLI): see queues,
//! pause and resume them, retry or discard failed jobs, clear finished
//! ones; list jobs, processes and recurring tasks (`listings.rs`); record
//! and read the audit log (`audit.rs`); read the job statistics
//! (`stats.rs`); see the database's health (`health.rs`).

mod audit;
mod control;
mod health;
mod known;
mod ledger;
mod listings;
mod names;
mod stats;

pub use audit::{AuditEntry, AuditSource, NewAuditEntry};
pub use control::Cancelled;
pub use health::{
    DatabaseHealth, Horizon, OpenTransaction, PostgresHealth, SqliteHealth, TableHealth,
};
pub use known::KnownNames;
pub(crate) use known::listed;
pub use ledger::{ConcurrencyKey, Tick};
pub use listings::{JobFilter, JobPage, ProcessInfo, RecurringInfo};
pub use names::Name;
pub use stats::{JobCount, StatsBucket};

use std::time::Duration;

use serde::Serialize;

use crate::client::Queue;
use crate::process::wakeups;
use crate::store::FailedSelection;
use crate::types::{Result, validate_queue_name};

/// One queue's state, as [`Queue::queues`] reports it. Each count is the
/// number of the queue's jobs with that [`JobStatus`](crate::JobStatus),
/// so it agrees with [`Queue::jobs`] filtered by status and queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// The queue's name.
    pub name: String,
    /// Jobs waiting for a worker.
    pub ready: u64,
    /// Jobs waiting for their first run time (a delay or `run_at`).
    pub scheduled: u64,
    /// Jobs waiting for the run time of a retry.
    pub retrying: u64,
    /// Jobs a worker claimed ahead and has not started yet.
    pub claimed: u64,
    /// Jobs running in a worker.
    pub running: u64,
    /// Jobs waiting for a concurrency slot.
    pub blocked: u64,
    /// Jobs that failed for good.
    pub failed: u64,
    /// Workflow members waiting for their parents to end.
    pub waiting: u64,
    /// How long the oldest ready job has waited (database clock); `None`
    /// when nothing is ready.
    #[serde(with = "humantime_serde")]
    pub latency: Option<Duration>,
    /// Whether workers skip this queue.
    pub paused: bool,
}

/// Which failed jobs [`Queue::retry_failed`] and [`Queue::discard_failed`]
/// act on. Conditions combine with AND.
#[derive(Debug, Clone, Default)]
pub struct FailedFilter {
    selection: FailedSelection,
}

impl FailedFilter {
    /// Every failed job.
    pub fn all() -> FailedFilter {
        FailedFilter::default()
    }

    /// These failed jobs (ids that are not failed are ignored).
    pub fn ids(ids: impl IntoIterator<Item = i64>) -> FailedFilter {
        FailedFilter {
            selection: FailedSelection {
                ids: Some(ids.into_iter().collect()),
                ..FailedSelection::default()
            },
        }
    }

    /// Only jobs of this kind.
    pub fn kind(mut self, kind: impl Into<String>) -> FailedFilter {
        self.selection.kind = Some(kind.into());
        self
    }

    /// Only jobs of this queue.
    pub fn queue(mut self, queue: impl Into<String>) -> FailedFilter {
        self.selection.queue = Some(queue.into());
        self
    }
}

impl Queue {
    /// Every queue that has jobs in any state (finished ones included: the
    /// job statistics keep every queue ever counted), is paused, or is
    /// named exactly in a registered worker's queue list, by name, with
    /// its counts and latency (one consistent snapshot).
    pub fn queues(&self) -> Result<Vec<QueueStats>> {
        let snapshot = self.store().queue_counts()?;
        let (mut counts, now) = (snapshot.counts, snapshot.now);
        for metadata in &snapshot.worker_metadata {
            for name in known::exact_names(&known::worker_lists(metadata).0) {
                counts.entry(name).or_default();
            }
        }
        Ok(counts
            .into_iter()
            .map(|(name, c)| QueueStats {
                name,
                ready: c.ready.max(0) as u64,
                scheduled: c.scheduled.max(0) as u64,
                retrying: c.retrying.max(0) as u64,
                claimed: c.claimed.max(0) as u64,
                running: c.running.max(0) as u64,
                blocked: c.blocked.max(0) as u64,
                failed: c.failed.max(0) as u64,
                waiting: c.waiting.max(0) as u64,
                latency: c
                    .oldest_ready
                    .map(|t| (now - t).to_std().unwrap_or_default()),
                paused: c.paused,
            })
            .collect())
    }

    /// One queue's state (zeros for a queue that holds nothing).
    pub fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        validate_queue_name(name)?;
        Ok(self
            .queues()?
            .into_iter()
            .find(|q| q.name == name)
            .unwrap_or(QueueStats {
                name: name.to_string(),
                ready: 0,
                scheduled: 0,
                retrying: 0,
                claimed: 0,
                running: 0,
                blocked: 0,
                failed: 0,
                waiting: 0,
                latency: None,
                paused: false,
            }))
    }

    /// Pauses `queue`: workers stop claiming from it; enqueueing to it goes
    /// on. Returns false if it was paused already.
    pub fn pause(&self, queue: &str) -> Result<bool> {
        validate_queue_name(queue)?;
        let changed = self.store().pause_set(queue, true)?;
        log::info!("queue {queue} paused");
        Ok(changed)
    }

    /// Resumes `queue`. Returns false if it was not paused.
    pub fn resume(&self, queue: &str) -> Result<bool> {
        validate_queue_name(queue)?;
        let changed = self.store().pause_set(queue, false)?;
        log::info!("queue {queue} resumed");
        wakeups::wake(self.url().expose());
        Ok(changed)
    }

    /// Moves the failed jobs `filter` selects back to ready, in batches of
    /// 1,000. A job that had used all its attempts gets one more; its stall
    /// count starts again at 0. Returns how many were retried.
    pub fn retry_failed(&self, filter: &FailedFilter) -> Result<u64> {
        let n = self.store().failed_retry(&filter.selection)?;
        log::info!("retried {n} failed jobs");
        if n > 0 {
            wakeups::wake(self.url().expose());
        }
        Ok(n)
    }

    /// Deletes the failed jobs `filter` selects, in batches of 1,000.
    /// Returns how many were discarded.
    pub fn discard_failed(&self, filter: &FailedFilter) -> Result<u64> {
        let n = self.store().failed_discard(&filter.selection)?;
        log::info!("discarded {n} failed jobs");
        Ok(n)
    }

    /// The query plans of solidq's hot statements on this database, as
    /// (name, plan) pairs: what `EXPLAIN` says each would do now. For
    /// checking that every one uses an index (see `docs/query-plans.md`).
    #[doc(hidden)]
    pub fn explain_hot_queries(&self) -> Result<Vec<(String, String)>> {
        self.store().explain_hot()
    }

    /// Vacuums and analyzes solidq's tables where their statistics say it is
    /// due (what supervisors and standalone workers do every few seconds);
    /// returns what it did, one line per table.
    #[doc(hidden)]
    pub fn tend_tables(&self) -> Result<Vec<String>> {
        self.store().tables_tend()
    }

    /// Deletes finished jobs whose `keep_result` has ended (what the
    /// supervisor's cleaner does), or with `older_than`, every finished job
    /// that finished longer ago than that. Frees their unique keys. Returns
    /// how many were deleted.
    pub fn clear_finished(&self, older_than: Option<Duration>) -> Result<u64> {
        let (n, _) = self.store().jobs_clean(older_than, None)?;
        if n > 0 {
            log::info!("deleted {n} finished jobs");
        }
        Ok(n)
    }
}
