//! Enqueue and finish: the `Store` methods that open a transaction and
//! apply the rules of `rules.rs` on the driver.

use diesel::QueryResult;

use crate::store::{
    Completion, Driver, FinishReport, Inserted, NewJob, Progress, Start, Store, in_transaction,
};
use crate::types::Result;

impl Store {
    /// Inserts jobs in one transaction: each one's new id, or the id of
    /// the existing job holding the same unique key (`Err`), and the jobs
    /// discarded at their concurrency limit on the way in.
    pub(crate) fn jobs_enqueue(&self, jobs: &[NewJob]) -> Result<Inserted> {
        let inserted = self.with_driver("jobs_enqueue", |d| {
            super::rules::enqueue_reporting(d, jobs, false)
        })?;
        self.notify_ready(jobs);
        Ok(inserted)
    }

    /// [`Store::jobs_enqueue`] on a driver the caller holds (its own
    /// connection, or one inside its transaction), reporting the jobs
    /// discarded on the way in instead of logging them: the caller reports
    /// them once they are committed.
    pub(crate) fn jobs_enqueue_on(
        d: &mut dyn Driver,
        jobs: &[NewJob],
        notify: bool,
    ) -> QueryResult<Inserted> {
        super::rules::enqueue_reporting(d, jobs, notify)
    }

    /// Records a batch of completions in one transaction, each fenced by its
    /// claim: a completion whose claim is gone is skipped (reported as lost),
    /// the rest of the batch is written. `starts` (jobs claimed ahead that
    /// started, none of them among the completions) are recorded with them,
    /// and `progress` (the last progress and step checkpoints of jobs
    /// ending in this batch) before the outcomes, fenced by the same
    /// claims, in the same transaction.
    pub(crate) fn claimed_finish(
        &self,
        completions: &[Completion],
        starts: &[Start],
        progress: &[Progress],
    ) -> Result<FinishReport> {
        if completions.is_empty() && starts.is_empty() && progress.is_empty() {
            return Ok(FinishReport::default());
        }
        self.with_driver("claimed_finish", |d| {
            if progress.is_empty() && super::rules::single_statement(completions, starts) {
                super::rules::finish_on_driver(d, completions, starts)
            } else {
                in_transaction(d, |d| {
                    if !progress.is_empty() {
                        d.jobs_set_progress(progress)?;
                    }
                    super::rules::finish_on_driver(d, completions, starts)
                })
            }
        })
    }
}
