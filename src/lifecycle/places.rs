//! Concurrency places (the model is in [`crate::concurrency`]):
//! placing limited jobs that become due, giving slots back when their
//! holders end, and the dispatcher's sweep of expired semaphores. Written
//! once over [`Driver`] primitives; every function runs inside the caller's
//! transaction, so a slot changes hands in the same transaction as the job
//! that takes or frees it.

use diesel::QueryResult;

use crate::store::{Driver, LimitedJob, Slot, Store, in_transaction};
use crate::types::Result;

/// Where limited jobs that became due went.
#[derive(Debug, Default, Clone)]
pub(crate) struct Placement {
    /// The queue of each job that took a slot and is ready.
    pub ready: Vec<String>,
    /// How many wait in blocked.
    pub blocked: usize,
    /// The jobs discarded, for the caller to report once its transaction
    /// commits.
    pub discarded: Vec<LimitedJob>,
}

/// Gives back the slots of jobs that ended (finished, failed, or waiting
/// for a retry) and hands each to the next blocked job of its key. Returns
/// the queues of the jobs that became ready.
pub(crate) fn release_slots(d: &mut dyn Driver, slots: &[Slot]) -> QueryResult<Vec<String>> {
    let mut queues = Vec::new();
    for slot in slots {
        d.semaphore_signal(&slot.key, &slot.limit)?;
        queues.extend(release_blocked(d, &slot.key)?);
    }
    Ok(queues)
}

/// Moves blocked jobs of `key` to ready while its semaphore has free slots
/// (or is gone), in priority then id order.
fn release_blocked(d: &mut dyn Driver, key: &str) -> QueryResult<Vec<String>> {
    let mut queues = Vec::new();
    while let Some(job) = d.blocked_next(key)? {
        let slot = job.slot();
        if !d.semaphore_acquire(&slot.key, &slot.limit)? {
            break;
        }
        d.blocked_delete(job.job_id)?;
        queues.push(job.queue_name.clone());
        d.ready_insert(std::slice::from_ref(&job))?;
    }
    Ok(queues)
}

/// What a concurrency sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Semaphores deleted because nobody touched them for their duration.
    pub expired: usize,
    /// Blocked jobs moved to ready.
    pub released: usize,
}

impl Store {
    /// The dispatcher's sweep: deletes semaphores untouched for their
    /// duration, then offers slots to the blocked jobs of those keys and of
    /// keys whose blocked jobs waited past their own expiry (at most
    /// `batch` keys).
    pub(crate) fn concurrency_sweep(&self, batch: usize) -> Result<Sweep> {
        self.with_driver("concurrency_sweep", |d| {
            in_transaction(d, |d| {
                let mut keys = d.semaphores_delete_expired()?;
                let expired = keys.len();
                keys.extend(d.blocked_expired_keys(batch)?);
                keys.sort();
                keys.dedup();
                let mut queues = Vec::new();
                for key in &keys {
                    queues.extend(release_blocked(d, key)?);
                }
                notify(d, &queues)?;
                Ok(Sweep {
                    expired,
                    released: queues.len(),
                })
            })
        })
    }
}

/// Tells listeners of these queues, at commit, that jobs became ready.
pub(crate) fn notify(d: &mut dyn Driver, queues: &[String]) -> QueryResult<()> {
    if queues.is_empty() {
        return Ok(());
    }
    let mut distinct = queues.to_vec();
    distinct.sort();
    distinct.dedup();
    d.notify_ready(&distinct)
}
