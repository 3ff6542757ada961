//! The claim loop. It claims up to the free capacity (threads plus the
//! adaptive claim-ahead, see [`claim_ahead`]) in one transaction, hands the
//! jobs to the pool in chunks, and sleeps until a thread frees up (when the
//! last claim came back full), a listener or an enqueue in this process
//! wakes it, or the polling interval passes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::pool;
use super::runtime::{Parts, Shared};
use super::shutdown;
use super::stats::claim_ahead;
use crate::events::JobClaimed;
use crate::process;
use crate::types::Result;

/// Runs the claim loop until the worker stops, then the shutdown sequence.
pub(super) fn run(shared: &Arc<Shared>, mut parts: Parts) -> Result<()> {
    let threads = shared.config.threads;
    let mut failures = 0u32;
    let mut backlog = false;
    let parent = std::os::unix::process::parent_id();
    while !shared.stopping.load(Ordering::SeqCst) {
        if shared.config.supervisor_id.is_some() && std::os::unix::process::parent_id() != parent {
            log::warn!("the supervisor (pid {parent}) is gone: shutting down gracefully");
            shared.request_stop();
            break;
        }
        let mut wait = if shared.listening.load(Ordering::SeqCst) {
            shared.config.fallback_polling_interval
        } else {
            shared.config.polling_interval
        };
        let process_id = shared.process_id();
        if process_id == 0 {
            reregister(shared);
        } else {
            // After a claim that came back full there is probably more work:
            // claim again once half the capacity is free or the claimed jobs
            // waiting for a thread have run out, so claims stay large without
            // letting a thread idle.
            let ahead = claim_ahead(
                threads,
                shared.config.prefetch,
                shared.claim_time.get(),
                shared.job_time.get(),
            );
            let capacity = threads + ahead;
            let free = capacity.saturating_sub(shared.inflight.load(Ordering::SeqCst));
            let worth_it =
                |free: usize, waiting: usize| free > 0 && (free * 2 >= capacity || waiting == 0);
            // Outcomes the completer cannot write yet: claim nothing more
            // until it catches up (it wakes us).
            let blocked = shared.backlog.is_full();
            if free > 0 && !blocked && (!backlog || worth_it(free, parts.work.len())) {
                let started = Instant::now();
                match shared.store.ready_claim(&parts.claim, process_id, free) {
                    Ok(jobs) => {
                        shared.stats.claim(jobs.len(), started.elapsed());
                        if !jobs.is_empty() {
                            shared.claim_time.observe(started.elapsed());
                        }
                        failures = 0;
                        backlog = jobs.len() == free;
                        shared.inflight.fetch_add(jobs.len(), Ordering::SeqCst);
                        // Before the threads get them, so a job's claim is
                        // always reported before its outcome.
                        for job in &jobs {
                            shared.events.job_claimed(&JobClaimed::of(job, process_id));
                        }
                        for chunk in pool::chunks(jobs, process_id, threads) {
                            parts.work.push(chunk);
                        }
                    }
                    Err(error) => {
                        failures += 1;
                        backlog = false;
                        wait = backoff(shared.config.polling_interval, failures);
                        log::warn!("claiming failed ({error}); retrying in {wait:?}");
                    }
                }
            }
            shared.wake_when_free.store(backlog, Ordering::SeqCst);
            // Threads that freed up before the flag was set did not wake us.
            let free = capacity.saturating_sub(shared.inflight.load(Ordering::SeqCst));
            if backlog && worth_it(free, parts.work.len()) {
                continue;
            }
        }
        let _ = parts.wake_rx.recv_timeout(wait);
    }
    shutdown::run(shared, &mut parts)
}

/// After the row was pruned: once nothing runs under the old registration,
/// register afresh.
fn reregister(shared: &Shared) {
    if shared.inflight.load(Ordering::SeqCst) > 0 {
        return;
    }
    match process::register(&shared.store, &shared.process, shared.events.as_ref()) {
        Ok(id) => {
            shared.process_id.store(id, Ordering::SeqCst);
            log::info!(
                "worker {} registered again as process {id}",
                shared.process.name
            );
        }
        Err(error) => log::warn!("cannot register again yet: {error}"),
    }
}

/// The wait after `failures` failed attempts in a row.
pub(super) fn backoff(base: Duration, failures: u32) -> Duration {
    (base * 2u32.saturating_pow(failures.min(5))).min(Duration::from_secs(30))
}
