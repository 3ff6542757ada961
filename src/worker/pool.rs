//! The fixed pool of threads that run jobs, fed from one queue of claimed
//! jobs: a thread that finishes a job takes the next one itself, so a slow
//! job never holds jobs queued behind it while other threads idle, and
//! everything not yet started can be handed back at once (at SIGTERM, or
//! when jobs turn out slower than the claim-ahead assumed).
//!
//! Before starting a job a thread checks that it may: the job's claim
//! belongs to the current registration (a pruned worker's claims were
//! released to others: it drops them unstarted), and the worker's lease
//! is valid (its row is certain to exist: a worker frozen or cut off past
//! it starts nothing until a heartbeat succeeds; see
//! `process::heartbeat`). A job claimed ahead is recorded as started, by
//! the completer, as it starts.
//!
//! The queue is a mutex and a condvar rather than a crossbeam channel:
//! crossbeam's receive spins with `sched_yield` before it sleeps, and with
//! 16 threads per process on 2 cores that spinning was 28 % of a worker's
//! CPU in the work-down benchmark. An idle thread here goes straight to
//! sleep on the futex.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::completer::{Message, Ran};
use super::executor;
use super::state::{Assigned, Running, Shared, Unreleased, WorkQueue, lock};
use super::transaction::{Claim, Finisher};
use crate::events::{JobReleased, ReleaseCause};
use crate::job::ProgressCell;
use crate::store::{ClaimedJob, Completion, Slot, StoredOptions};
use crate::types::{Error, Result};

/// Whether a thread may start a job now.
enum Verdict {
    Start,
    /// The worker stops: hand it back.
    HandBack,
    /// Its registration was pruned and the claim released: drop it.
    Drop,
}

/// How long a thread waits for the lease between checks of the worker's
/// state.
const LEASE_WAIT: Duration = Duration::from_millis(100);

/// Waits until `assigned` may start: its registration is current and the
/// lease valid.
fn verdict(shared: &Shared, assigned: &Assigned) -> Verdict {
    let mut warned = false;
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return Verdict::HandBack;
        }
        if shared.process_id() != assigned.process_id {
            return Verdict::Drop;
        }
        if shared.lease.is_valid() {
            return Verdict::Start;
        }
        if !warned {
            log::warn!(
                "not starting job {} yet: this worker's heartbeats have not succeeded for too long, so its claims may have been released to others",
                assigned.job.id
            );
            warned = true;
        }
        shared.lease.wait_valid(LEASE_WAIT);
    }
}

/// Starts thread `n` of the pool.
pub(super) fn spawn_thread(
    n: usize,
    shared: &Arc<Shared>,
    work: Arc<WorkQueue>,
    completions: Sender<Message>,
    exited: Sender<()>,
) -> Result<()> {
    let shared = Arc::clone(shared);
    let name = format!("solidq-worker-{n}");
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            executor::arm_panic_capture();
            while let Some(assigned) = work.pop() {
                match verdict(&shared, &assigned) {
                    Verdict::Start => run(&shared, n, assigned, &completions),
                    Verdict::HandBack => hand_back(&shared, vec![assigned]),
                    Verdict::Drop => {
                        log::warn!(
                            "dropping job {} unstarted: it was claimed under process row {}, which was pruned (its claim went back to ready)",
                            assigned.job.id,
                            assigned.process_id
                        );
                        shared.inflight.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }
            let _ = exited.send(());
        })
        .map(drop)
        .map_err(|source| Error::Thread { name, source })
}

fn run(shared: &Shared, thread: usize, assigned: Assigned, completions: &Sender<Message>) {
    let Assigned {
        job,
        process_id,
        claimed,
    } = assigned;
    if !job.started {
        // Claimed ahead: the completer records the start (batched, and
        // skipped when the outcome is written in the same batch).
        let _ = completions.send(Message::Started {
            job_id: job.id,
            process_id,
        });
    }
    let options = StoredOptions::parse(&job.options);
    let started = Instant::now();
    let cancel = Arc::new(AtomicBool::new(job.cancel_requested));
    shared.slots.set(
        thread,
        Some(Running {
            job_id: job.id,
            kind: job.kind.clone(),
            started,
            deadline: executor::deadline(&options, started),
            cancel: Arc::clone(&cancel),
        }),
    );
    // A cancellation heard before the slot above was set.
    if shared.cancels.is_asked(job.id) {
        cancel.store(true, Ordering::SeqCst);
    }
    let progress = {
        let completions = completions.clone();
        ProgressCell::new(job.id, process_id, move |cell| {
            let _ = completions.send(Message::Progress(cell));
        })
    };
    let finisher = Arc::new(Finisher::new(Claim {
        store: &shared.store,
        job_id: job.id,
        process_id,
        kind: &job.kind,
        slot: Slot::of(job.concurrency_key.as_deref(), &options),
        batch_id: job.batch_id,
        keep: Duration::from_millis(options.keep_result_ms),
        started,
        payload: &shared.registry.payload,
    }));
    let execution = executor::execute(
        &job,
        &options,
        started,
        &shared.registry,
        &shared.shutdown,
        executor::Attempt {
            progress: Some(progress),
            cancel,
            finisher: Some(finisher),
        },
    );
    let ended_at = on_claim_clock(&job, claimed, Instant::now());
    let wait = crate::events::elapsed(job.due_at, job.claimed_at) + started.duration_since(claimed);
    shared.cancels.forget(job.id);
    shared.registry.observe(&job.kind, execution.elapsed);
    // The outcome is logged and reported by the completer once it is
    // recorded (LogEvents logs it).
    let completion = Completion {
        job_id: job.id,
        process_id,
        outcome: execution.outcome,
        slot: Slot::of(job.concurrency_key.as_deref(), &options),
        batch_id: job.batch_id,
        started: execution.started,
        recorded: execution.recorded,
    };
    let ran = Ran {
        attempt: u32::try_from(job.attempts).unwrap_or(0).saturating_add(1),
        kind: job.kind,
        queue: job.queue_name,
        run_time: execution.elapsed,
        enqueued_at: job.created_at.and_utc(),
        error: execution.error,
        wait,
        ended_at,
    };
    shared.backlog.add();
    let _ = completions.send(Message::Done(completion, ran));
    shared.slots.set(thread, None);
    shared.inflight.fetch_sub(1, Ordering::SeqCst);
    if shared.wake_when_free.load(Ordering::SeqCst) {
        let _ = shared.wake.try_send(());
    }
}

/// `at`, a moment of this process, on the clock of `job`'s `claimed_at`
/// (the backend's): the claim's time plus what passed since it returned.
pub(super) fn on_claim_clock(
    job: &ClaimedJob,
    claimed: Instant,
    at: Instant,
) -> chrono::NaiveDateTime {
    chrono::Duration::from_std(at.saturating_duration_since(claimed))
        .ok()
        .and_then(|since| job.claimed_at.checked_add_signed(since))
        .unwrap_or(job.claimed_at)
}

/// Hands claimed jobs that never started back to ready (not a stall), so
/// other workers can take them.
pub(super) fn hand_back(shared: &Shared, jobs: Vec<Assigned>) {
    if jobs.is_empty() {
        return;
    }
    shared.inflight.fetch_sub(jobs.len(), Ordering::SeqCst);
    release(
        shared,
        jobs.iter()
            .map(|a| Unreleased::of(&a.job, a.process_id))
            .collect(),
    );
}

/// Releases claims of jobs that never started; those the database cannot
/// take now wait in [`Shared::unreleased`] for the poller's next turn
/// ([`release_pending`]). Fenced: a claim no longer this registration's
/// (its process was pruned, which released it) is left alone.
pub(super) fn release(shared: &Shared, jobs: Vec<Unreleased>) {
    let mut by_process: HashMap<i64, Vec<Unreleased>> = HashMap::new();
    for job in jobs {
        by_process.entry(job.process_id).or_default().push(job);
    }
    for (process_id, jobs) in by_process {
        let ids: Vec<i64> = jobs.iter().map(|j| j.job_id).collect();
        match shared.store.claimed_release(process_id, &ids) {
            Ok(released) => {
                log::info!(
                    "released {} claimed jobs that had not started: {released:?}",
                    released.len()
                );
                for job in jobs.iter().filter(|j| released.contains(&j.job_id)) {
                    shared.events.job_released(&JobReleased {
                        job_id: job.job_id,
                        kind: job.kind.clone(),
                        queue: job.queue.clone(),
                        process_id,
                        cause: ReleaseCause::NotStarted,
                        failed: None,
                    });
                }
            }
            Err(error) => {
                log::warn!(
                    "cannot release unstarted jobs {ids:?} yet ({error}); trying again at every poll"
                );
                lock(&shared.unreleased).extend(jobs);
            }
        }
    }
}

/// Tries again the releases the database could not take before.
pub(super) fn release_pending(shared: &Shared) {
    let pending = std::mem::take(&mut *lock(&shared.unreleased));
    if !pending.is_empty() {
        release(shared, pending);
    }
}
