//! The fixed pool of threads that run jobs. The poller hands them claimed
//! jobs in chunks: one job per chunk when a claim is small (slow jobs,
//! where spreading over threads matters), a few per chunk when it is large
//! (claims are only large for fast jobs), which saves a thread wake-up per
//! job. A thread that finds the worker stopping hands the unstarted rest of
//! its chunk back to ready.
//!
//! The hand-off is a mutex-and-condvar queue rather than a crossbeam
//! channel: crossbeam's receive spins with `sched_yield` before it sleeps,
//! and with 16 threads per process on 2 cores that spinning was 28 % of a
//! worker's CPU in the work-down benchmark. An idle thread here goes
//! straight to sleep on the futex.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;

use super::completer::{Message, Ran};
use super::executor;
use super::runtime::{Shared, lock};
use crate::events::{JobReleased, ReleaseCause};
use crate::store::{ClaimedJob, Completion, Slot, StoredOptions};
use crate::types::{Error, Result};

/// A claimed job and the registration (process id) it was claimed under.
pub(super) type Assigned = (ClaimedJob, i64);

/// What a thread receives: jobs to run in order.
pub(super) type Chunk = Vec<Assigned>;

/// Splits a claim into chunks for `threads` threads.
pub(super) fn chunks(jobs: Vec<ClaimedJob>, process_id: i64, threads: usize) -> Vec<Chunk> {
    let size = jobs.len().div_ceil(threads.max(1)).max(1);
    let mut out = Vec::with_capacity(jobs.len().div_ceil(size));
    let mut current = Vec::with_capacity(size);
    for job in jobs {
        current.push((job, process_id));
        if current.len() == size {
            out.push(std::mem::replace(&mut current, Vec::with_capacity(size)));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Chunks waiting for a thread.
#[derive(Default)]
pub(super) struct WorkQueue {
    state: Mutex<(VecDeque<Chunk>, bool)>,
    ready: Condvar,
}

impl WorkQueue {
    /// Queues a chunk and wakes one sleeping thread.
    pub(super) fn push(&self, chunk: Chunk) {
        lock(&self.state).0.push_back(chunk);
        self.ready.notify_one();
    }

    /// The next chunk; `None` once closed and empty.
    fn pop(&self) -> Option<Chunk> {
        let mut state = lock(&self.state);
        loop {
            if let Some(chunk) = state.0.pop_front() {
                return Some(chunk);
            }
            if state.1 {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Chunks waiting for a thread.
    pub(super) fn len(&self) -> usize {
        lock(&self.state).0.len()
    }

    /// Closes the queue and takes what was still waiting; threads finish
    /// their current chunk and exit.
    pub(super) fn close(&self) -> Vec<Chunk> {
        let mut state = lock(&self.state);
        state.1 = true;
        let waiting = state.0.drain(..).collect();
        drop(state);
        self.ready.notify_all();
        waiting
    }
}

/// A job on a thread right now.
pub(super) struct Running {
    pub job_id: i64,
    pub kind: String,
    pub started: Instant,
    pub deadline: Option<Instant>,
}

/// One slot per thread: what it is running. Each thread writes only its
/// own slot, so the locks are never contended by the pool itself.
pub(super) struct Slots(Vec<Mutex<Option<Running>>>);

impl Slots {
    pub(super) fn new(threads: usize) -> Slots {
        Slots((0..threads).map(|_| Mutex::new(None)).collect())
    }

    fn set(&self, thread: usize, running: Option<Running>) {
        *lock(&self.0[thread]) = running;
    }

    /// Calls `f` for every running job.
    pub(super) fn each(&self, mut f: impl FnMut(&Running)) {
        for slot in &self.0 {
            if let Some(running) = lock(slot).as_ref() {
                f(running);
            }
        }
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
            while let Some(chunk) = work.pop() {
                let mut jobs = chunk.into_iter();
                while let Some((job, process_id)) = jobs.next() {
                    if shared.stopping.load(Ordering::SeqCst) {
                        hand_back(
                            &shared,
                            std::iter::once((job, process_id)).chain(jobs).collect(),
                        );
                        break;
                    }
                    run(&shared, n, job, process_id, &completions);
                }
            }
            let _ = exited.send(());
        })
        .map(drop)
        .map_err(|source| Error::Thread { name, source })
}

fn run(
    shared: &Shared,
    thread: usize,
    job: ClaimedJob,
    process_id: i64,
    completions: &Sender<Message>,
) {
    let options = StoredOptions::parse(&job.options);
    let started = Instant::now();
    shared.slots.set(
        thread,
        Some(Running {
            job_id: job.id,
            kind: job.kind.clone(),
            started,
            deadline: executor::deadline(&options, started),
        }),
    );
    let execution = executor::execute(&job, &options, started, &shared.registry, &shared.shutdown);
    shared.job_time.observe(execution.elapsed);
    // The outcome is logged and reported by the completer once it is
    // recorded (LogEvents logs it).
    let completion = Completion {
        job_id: job.id,
        process_id,
        outcome: execution.outcome,
        slot: Slot::of(job.concurrency_key.as_deref(), &options),
    };
    let ran = Ran {
        attempt: u32::try_from(job.attempts).unwrap_or(0).saturating_add(1),
        kind: job.kind,
        queue: job.queue_name,
        run_time: execution.elapsed,
        enqueued_at: job.created_at.and_utc(),
        error: execution.error,
    };
    shared.backlog.add();
    let _ = completions.send(Message::Done(completion, ran));
    shared.slots.set(thread, None);
    shared.inflight.fetch_sub(1, Ordering::SeqCst);
    if shared.wake_when_free.load(Ordering::SeqCst) {
        let _ = shared.wake.try_send(());
    }
}

/// Hands claimed jobs that never started back to ready (not a stall), so
/// other workers can take them while this one stops.
pub(super) fn hand_back(shared: &Shared, jobs: Vec<Assigned>) {
    if jobs.is_empty() {
        return;
    }
    shared.inflight.fetch_sub(jobs.len(), Ordering::SeqCst);
    let mut by_process: HashMap<i64, Vec<i64>> = HashMap::new();
    for (job, process_id) in &jobs {
        by_process.entry(*process_id).or_default().push(job.id);
    }
    for (process_id, ids) in by_process {
        match shared.store.claimed_release(process_id, &ids) {
            Ok(released) => {
                log::info!(
                    "released {} claimed jobs that had not started: {released:?}",
                    released.len()
                );
                for (job, _) in jobs.iter().filter(|(j, _)| released.contains(&j.id)) {
                    shared.events.job_released(&JobReleased {
                        job_id: job.id,
                        kind: job.kind.clone(),
                        queue: job.queue_name.clone(),
                        process_id,
                        cause: ReleaseCause::NotStarted,
                        failed: None,
                    });
                }
            }
            Err(error) => {
                log::warn!(
                    "cannot release unstarted jobs {ids:?} yet ({error}); deregistration will"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64) -> ClaimedJob {
        ClaimedJob {
            id,
            queue_name: "q".into(),
            kind: "k".into(),
            arguments: "null".into(),
            concurrency_key: None,
            priority: 0,
            options: "{}".into(),
            delivery: "at_least_once".into(),
            max_attempts: 1,
            attempts: 0,
            stalled_count: 0,
            created_at: chrono::NaiveDateTime::MIN,
            due_at: chrono::NaiveDateTime::MIN,
            claimed_at: chrono::NaiveDateTime::MIN,
            ord: 0,
        }
    }

    #[test]
    fn small_claims_go_one_per_thread_and_large_ones_in_even_chunks() {
        let sizes = |n: i64, threads| {
            chunks((0..n).map(job).collect(), 1, threads)
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(3, 16), [1, 1, 1]);
        assert_eq!(sizes(16, 16), [1; 16]);
        assert_eq!(
            sizes(100, 16),
            [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2]
        );
        let order: Vec<i64> = chunks((0..10).map(job).collect(), 1, 3)
            .into_iter()
            .flatten()
            .map(|(j, _)| j.id)
            .collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>(), "claim order is kept");
    }
}
