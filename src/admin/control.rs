//! Job control through the library (and `solidq job cancel|run-now`,
//! `solidq jobs cancel|run-now`): cancel a waiting job (discarded with the
//! operator's reason), ask a running one to stop, run a scheduled or
//! blocked one now — one job, or every job a [`JobFilter`] lists. A job
//! cancelled while others wait for it cancels them in turn (see
//! [`crate::workflow`]).
//!
//! A running job learns of its cancellation through
//! [`JobContext::is_cancelled`](crate::JobContext::is_cancelled): on
//! PostgreSQL its worker is notified at once, on SQLite a busy worker
//! checks at most twice a second (one read). When it then returns an error (any
//! error, including [`JobError::interrupted`](crate::JobError::interrupted))
//! it is recorded as discarded with the cancellation, never retried; a job
//! that finishes its work anyway is recorded as succeeded. A job asked to
//! stop whose worker dies is discarded when next claimed, without running.

use serde::Serialize;

use super::JobFilter;
use crate::client::Queue;
use crate::dispatcher::Dispatcher;
use crate::process::wakeups;
use crate::types::{Error, JobInfo, JobStatus, Result};

/// What a cancellation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Cancelled {
    /// Waiting jobs (ready, scheduled, retrying, blocked, waiting for
    /// parents) now discarded.
    pub discarded: u64,
    /// Claimed or running jobs asked to stop.
    pub stopping: u64,
    /// Jobs left as they were: finished, failed, or asked to stop before.
    pub untouched: u64,
}

impl Queue {
    /// Cancels job `id`: discarded with `reason` if it waits to run,
    /// asked to stop if it runs (it learns of it through
    /// [`JobContext::is_cancelled`](crate::JobContext::is_cancelled)).
    /// `JobNotFound` if there is no such job.
    pub fn cancel_job(&self, id: i64, reason: &str) -> Result<Cancelled> {
        let info = self.job(id)?;
        self.cancel_listed(&[info], reason)
    }

    /// Cancels every job `filter` lists (up to its `limit`), as
    /// [`Queue::cancel_job`] does one.
    pub fn cancel_jobs(&self, filter: &JobFilter, reason: &str) -> Result<Cancelled> {
        let listed = self.jobs(filter)?;
        self.cancel_listed(&listed, reason)
    }

    /// Runs job `id` now if it is scheduled, retrying or blocked: a
    /// scheduled one becomes due (and takes its concurrency slot as usual),
    /// a blocked one leaves its concurrency limit and is ready at once.
    /// Returns false if it was in none of those states; `JobNotFound` if
    /// there is no such job.
    pub fn run_job_now(&self, id: i64) -> Result<bool> {
        let info = self.job(id)?;
        Ok(self.run_listed_now(&[info])? == 1)
    }

    /// Runs every scheduled, retrying or blocked job `filter` lists (up to
    /// its `limit`) now; returns how many.
    pub fn run_jobs_now(&self, filter: &JobFilter) -> Result<u64> {
        let listed = self.jobs(filter)?;
        self.run_listed_now(&listed)
    }

    fn cancel_listed(&self, jobs: &[JobInfo], reason: &str) -> Result<Cancelled> {
        if reason.contains('\0') {
            return Err(Error::InvalidOption {
                option: "reason",
                value: reason.escape_debug().to_string(),
                reason: "must not contain NUL".into(),
            });
        }
        // Waiting first, then running: a job claimed since it was listed
        // is asked to stop instead of discarded, one that ended is left.
        let ids: Vec<i64> = jobs
            .iter()
            .filter(|j| is_waiting(j.status) || is_running(j.status))
            .map(|j| j.id)
            .collect();
        let names: std::collections::HashMap<i64, (String, String)> = jobs
            .iter()
            .map(|j| (j.id, (j.queue.clone(), j.kind.clone())))
            .collect();
        let mut done = Cancelled::default();
        for batch in ids.chunks(BATCH) {
            let discarded = self.store().jobs_cancel_waiting(batch, reason, &names)?;
            done.discarded += discarded.len() as u64;
            let rest: Vec<i64> = batch
                .iter()
                .copied()
                .filter(|id| !discarded.contains(id))
                .collect();
            if !rest.is_empty() {
                done.stopping += self.store().jobs_cancel_running(&rest)?.len() as u64;
            }
        }
        done.untouched = jobs.len() as u64 - done.discarded - done.stopping;
        if done.discarded + done.stopping > 0 {
            log::info!(
                "cancelled jobs ({reason}): {} discarded, {} asked to stop",
                done.discarded,
                done.stopping
            );
            // A slot given back may have made blocked jobs ready.
            wakeups::wake(self.url().expose());
        }
        Ok(done)
    }

    fn run_listed_now(&self, jobs: &[JobInfo]) -> Result<u64> {
        let mut moved = 0;
        let ids: Vec<i64> = jobs
            .iter()
            .filter(|j| {
                matches!(
                    j.status,
                    JobStatus::Scheduled | JobStatus::Retrying | JobStatus::Blocked
                )
            })
            .map(|j| j.id)
            .collect();
        for batch in ids.chunks(BATCH) {
            moved += self.store().jobs_run_now(batch)? as u64;
        }
        if moved > 0 {
            let dispatcher = Dispatcher::embedded(self.clone());
            while dispatcher.run_once()? > 0 {}
            log::info!("ran {moved} jobs now");
            wakeups::wake(self.url().expose());
        }
        Ok(moved)
    }
}

/// Jobs per transaction.
const BATCH: usize = 1_000;

fn is_waiting(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Ready
            | JobStatus::Scheduled
            | JobStatus::Waiting
            | JobStatus::Retrying
            | JobStatus::Blocked
    )
}

fn is_running(status: JobStatus) -> bool {
    matches!(status, JobStatus::Claimed | JobStatus::Running)
}
