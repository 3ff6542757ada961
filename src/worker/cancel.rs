//! How a worker learns that an operator cancelled one of its running jobs
//! (`Queue::cancel_job`): the listener thread asks the database which of
//! its claimed jobs were asked to stop when it heard something that may be
//! one, and at least every so often while jobs run (the backend's cadence:
//! `Store::cancel_checks`), and sets those jobs' cancellation, which
//! `ctx.is_cancelled()` reads.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::{Shared, lock};

/// Checks for cancellations when one is wanted (or the fallback is due)
/// and jobs run; sets the cancellation of those asked to stop.
pub(super) fn tick(shared: &Shared) {
    let cancels = &shared.cancels;
    if shared.inflight.load(Ordering::SeqCst) == 0 {
        cancels.due.store(false, Ordering::SeqCst);
        return;
    }
    let since = lock(&cancels.last_check).map(|at| at.elapsed());
    let checks = shared.store.cancel_checks();
    let wanted = cancels.due.load(Ordering::SeqCst) && since.is_none_or(|s| s >= checks.min_gap);
    if !wanted && since.is_some_and(|s| s < checks.fallback) {
        return;
    }
    cancels.due.store(false, Ordering::SeqCst);
    *lock(&cancels.last_check) = Some(Instant::now());
    let process_id = shared.process_id.load(Ordering::SeqCst);
    match shared.store.claimed_cancelled(process_id) {
        Ok(ids) if ids.is_empty() => {}
        Ok(ids) => {
            {
                let mut asked = lock(&cancels.asked);
                asked.extend(ids.iter().copied());
                cancels.any.store(true, Ordering::SeqCst);
            }
            log::info!("an operator cancelled running jobs {ids:?}");
            shared.slots.cancel(&ids);
        }
        Err(error) => {
            cancels.due.store(true, Ordering::SeqCst);
            log::warn!("cannot check for cancelled jobs ({error}); trying again");
        }
    }
}
