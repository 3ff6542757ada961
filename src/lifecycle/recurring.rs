//! A recurring task's tick: its job enqueued by the rules of an enqueue,
//! its guard written in the same transaction.

use crate::store::{Fire, Store, TickFire, in_transaction};
use crate::types::Result;

impl Store {
    /// Fires one tick: inserts its job and its guard in one transaction,
    /// and commits only if the database's clock, as the job's `created_at`
    /// stored it, is at or past the tick and not more than
    /// `tick.max_lateness` past it. Nothing is written unless it returns
    /// [`Fire::Enqueued`].
    pub(crate) fn recurring_fire(&self, tick: &TickFire<'_>) -> Result<Fire> {
        self.with_driver("recurring_fire", |d| {
            let mut refused = None;
            let outcome = in_transaction(d, |d| {
                let mut inserted = Store::jobs_enqueue_on(d, std::slice::from_ref(tick.job), true)?;
                let job_id = match inserted.outcome.pop() {
                    Some(Ok(id)) => id,
                    // Its unique key is held by another job: nothing to do.
                    Some(Err(_)) | None => return Ok(Fire::Elsewhere),
                };
                let refuse = |fire: Fire, refused: &mut Option<Fire>| {
                    *refused = Some(fire);
                    Err(diesel::result::Error::RollbackTransaction)
                };
                let Some(created_at) =
                    d.recurring_execution_insert(tick.task_key, tick.run_at, job_id)?
                else {
                    // Fired already (by another scheduler, or a run of
                    // the same second): undo our job.
                    return refuse(Fire::Elsewhere, &mut refused);
                };
                if created_at < tick.run_at {
                    return refuse(Fire::NotYet { now: created_at }, &mut refused);
                }
                let late = (created_at - tick.run_at).to_std().unwrap_or_default();
                if late > tick.max_lateness {
                    return refuse(Fire::TooLate { now: created_at }, &mut refused);
                }
                Ok(Fire::Enqueued {
                    job_id,
                    created_at,
                    discarded: inserted.discarded.pop(),
                })
            });
            match (outcome, refused) {
                (Err(diesel::result::Error::RollbackTransaction), Some(fire)) => Ok(fire),
                (other, _) => other,
            }
        })
    }
}
