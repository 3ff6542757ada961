//! The stop: no more claims; hand back claimed jobs that never started (so
//! other workers can take them during the grace period); let running jobs
//! finish for up to `shutdown_timeout`; write the last outcomes; then, in
//! one transaction, release what is still claimed (at-most-once jobs that
//! were running fail instead) and delete the process row. The heartbeat
//! stops only after that, so nobody prunes a worker that is still draining;
//! then the outcomes counted since its last beat go to the job statistics.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::pool;
use super::state::{Alone, Parts, Shared, lock};
use crate::events::{JobReleased, ReleaseCause};
use crate::lifecycle::ReleaseReason;
use crate::types::Result;

pub(super) fn run(shared: &Arc<Shared>, parts: &mut Parts) -> Result<()> {
    let grace_end = Instant::now() + shared.config.shutdown_timeout;
    let process_id = shared.process_id();
    log::info!(
        "worker {} stopping: {} jobs in flight, waiting up to {:?}",
        shared.process.name,
        shared.inflight.load(Ordering::SeqCst),
        shared.config.shutdown_timeout
    );
    if let Some(mut maintenance) = parts.maintenance.take() {
        maintenance.stop();
    }
    if let Some(dispatcher) = parts.dispatcher.take() {
        let _ = dispatcher.stop();
    }
    if let Some(listener) = parts.listener.take() {
        let _ = listener.join();
    }
    if let Some(duty) = parts.duty.take() {
        let _ = duty.join();
    }

    // Claimed but never started: hand back at once. Closing the queue ends
    // the threads once their current job returns.
    let mut unstarted = parts.work.close();
    if let Some(Alone::Waiting(waiting)) = parts.alone.take() {
        unstarted.push(*waiting);
    }
    pool::hand_back(shared, unstarted);

    // Let running jobs finish.
    let mut exited = 0;
    while exited < shared.config.threads {
        if parts.exited_rx.recv_deadline(grace_end).is_err() {
            break;
        }
        exited += 1;
    }
    // Jobs whose outcome the completer never wrote ran: at-most-once ones
    // among them fail below instead of going back to ready.
    let unwritten = parts
        .completer
        .stop(grace_end.max(Instant::now() + Duration::from_secs(2)));

    // Release what is still claimed and deregister, in one transaction.
    let mut result = Ok(());
    let (mut still_running, mut started, mut longest) = (0, unwritten, Duration::ZERO);
    shared.slots.each(|job| {
        still_running += 1;
        longest = longest.max(job.started.elapsed());
        started.push(job.job_id);
    });
    if process_id != 0 {
        let reason = ReleaseReason::Shutdown { started };
        // A database that is away (the reason this worker may be stopping)
        // gets as long as the outcomes got: a deregistration that lands
        // releases the claims at once and counts no stall.
        let deadline = grace_end.max(Instant::now() + Duration::from_secs(2));
        // The heartbeat leaves the row alone from here (a beat landing just
        // after the row is deleted would take it for a prune).
        shared.process_id.store(0, Ordering::SeqCst);
        let mut deregistered = shared.store.process_deregister(process_id, &reason);
        let mut pause = Duration::from_millis(50);
        while let Err(error) = &deregistered {
            if !error.is_transient() || Instant::now() + pause > deadline {
                break;
            }
            log::warn!("cannot deregister process {process_id} yet ({error}); retrying");
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(1));
            deregistered = shared.store.process_deregister(process_id, &reason);
        }
        match deregistered {
            Ok(report) if !report.entries.is_empty() => {
                log::warn!(
                    "shutdown timeout: {still_running} jobs still running; released {:?} to ready, failed at-most-once {:?}",
                    report.released(),
                    report.failed()
                );
                for entry in report.entries {
                    shared.events.job_released(&JobReleased {
                        job_id: entry.job.id,
                        kind: entry.job.kind,
                        queue: entry.job.queue_name,
                        process_id: entry.job.process_id,
                        cause: ReleaseCause::ShutdownTimeout,
                        failed: entry.failed,
                    });
                }
            }
            Ok(_) => {}
            Err(error) => {
                shared.process_id.store(process_id, Ordering::SeqCst);
                log::error!(
                    "cannot deregister process {process_id}: {error}; its claims will be released when it is pruned"
                );
                result = Err(error);
            }
        }
    }
    parts.heartbeat.stop();
    // Every outcome is written (or given up on) by now: the last counts.
    // A flush that fails here loses them; the jobs table stays the truth.
    if let Err(error) = shared.tally.flush(&shared.store) {
        log::warn!(
            "{} counted outcomes could not be added to the job statistics ({error}) and are lost",
            shared.tally.pending()
        );
    }
    if still_running > 0 {
        log::warn!(
            "worker stopped with {still_running} jobs still running on their threads (longest for {longest:?})"
        );
    }
    log::info!(
        "worker {} stopped: {}",
        shared.process.name,
        shared.stats.summary()
    );
    match lock(&shared.fatal).take() {
        Some(fatal) => Err(fatal),
        None => result,
    }
}
