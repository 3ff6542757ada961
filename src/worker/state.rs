//! The state a worker's threads share (`Shared`), what its poller owns
//! (`Parts`), and the plain types they hold: the queue of claimed jobs and
//! the threads' slots (run by `pool.rs`), the claims to hand back, the
//! cancellations heard of (checked by `cancel.rs`). Data and the methods
//! that only touch it; the loops that use them (`runtime.rs`, `poller.rs`,
//! `pool.rs`, `listen.rs`, `shutdown.rs`, `cancel.rs`) import from here,
//! and this file imports none of them.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::completer::{Backlog, Completer};
use super::registry::Registry;
use super::stats::{Ewma, Stats};
use super::tally::Tally;
use crate::config::WorkerConfig;
use crate::dispatcher::DispatcherHandle;
use crate::events::Events;
use crate::job::ShutdownSignal;
use crate::maintenance::Maintenance;
use crate::process::heartbeat::{Heartbeat, Lease};
use crate::process::wakeups::Reach;
use crate::store::{ClaimQuery, ClaimedJob, NewProcess, Store};
use crate::types::{Error, QueuePattern};

/// State shared by the worker's threads.
pub(super) struct Shared {
    pub store: Store,
    pub config: WorkerConfig,
    pub registry: Registry,
    pub process: NewProcess,
    /// The current registration; 0 while unregistered (pruned while alive).
    pub process_id: Arc<AtomicI64>,
    /// What the heartbeats prove: a job starts only while it is valid.
    pub lease: Arc<Lease>,
    /// Claimed and not yet done executing (queued or running).
    pub inflight: AtomicUsize,
    /// Set when the last claim came back full: more work is probably
    /// waiting, so a thread that frees up wakes the poller.
    pub wake_when_free: AtomicBool,
    pub slots: Slots,
    pub shutdown: Arc<ShutdownSignal>,
    pub stopping: AtomicBool,
    /// The queue list, to tell which notifications concern this worker.
    pub patterns: Vec<QueuePattern>,
    /// Whether a listener wakes it for new jobs, whether it acts on them
    /// (`duty.rs`), and so whether this process's enqueues wake it.
    pub reach: Arc<Reach>,
    /// The first queue of the worker's list that a notification named
    /// since the poller last read it (`usize::MAX`: none): a claim from a
    /// list of names probes from there on (see `ClaimLimits::from`).
    pub heard_from: AtomicUsize,
    pub stats: Arc<Stats>,
    /// Recorded outcomes not yet added to the job statistics.
    pub tally: Arc<Tally>,
    /// Cancellations of running jobs heard of.
    pub cancels: Cancels,
    pub events: Arc<dyn Events>,
    /// How long a claim takes, on average: with each kind's run time it
    /// decides how far ahead to claim.
    pub claim_time: Ewma,
    pub wake: Sender<()>,
    /// Outcomes not yet written: past its limit the poller waits.
    pub backlog: Arc<Backlog>,
    /// Why the worker stopped itself, if it did (never for the database
    /// being away).
    pub fatal: Mutex<Option<Error>>,
    /// Whether this worker acts on new-job notifications now (`duty.rs`).
    pub duty: DutyState,
    /// Claims of jobs that never started which could not be handed back
    /// (the database was away): the poller tries again at every turn
    /// until it takes them. The process no longer exits for an outage, so
    /// waiting for its deregistration could hold them for days.
    pub unreleased: Mutex<Vec<Unreleased>>,
}

impl Shared {
    pub fn request_stop(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            self.shutdown.request(self.config.shutdown_timeout);
        }
        let _ = self.wake.try_send(());
        self.duty.nudge();
    }

    pub fn process_id(&self) -> i64 {
        self.process_id.load(Ordering::SeqCst)
    }
}

/// Whether this worker wants the duty, and the duty thread's nudges: see
/// `duty.rs` (whether it acts is `Shared::reach`).
pub(super) struct DutyState {
    /// Whether it has room for more jobs and claims on notifications only
    /// (no backlog); the poller writes it after every claim.
    pub wanted: AtomicBool,
    nudge_tx: Sender<()>,
    pub nudge_rx: Receiver<()>,
}

impl DutyState {
    pub fn new() -> DutyState {
        let (nudge_tx, nudge_rx) = crossbeam_channel::bounded(1);
        DutyState {
            wanted: AtomicBool::new(false),
            nudge_tx,
            nudge_rx,
        }
    }

    /// Records whether the duty is wanted; the duty thread hears of a
    /// change at once.
    pub fn want(&self, wanted: bool) {
        if self.wanted.swap(wanted, Ordering::SeqCst) != wanted {
            self.nudge();
        }
    }

    pub fn nudge(&self) {
        let _ = self.nudge_tx.try_send(());
    }
}

/// A job that runs alone in this process (its last run ended with its
/// process dead): claimed, it waits until the process's other jobs end,
/// then runs with nothing else started until it ends, so a crash during
/// that run is blamed on it only.
pub(super) enum Alone {
    /// Claimed and not started, waiting for the others to end (counted
    /// in `inflight`).
    Waiting(Box<Assigned>),
    /// Running: the poller claims nothing until it ends.
    Running(i64),
}

/// What the poller thread owns.
pub(super) struct Parts {
    /// Shared with the completer, which claims on SQLite while it writes
    /// outcomes (`completer::ClaimRequest`).
    pub claim: Arc<ClaimQuery>,
    /// The job running alone, or waiting to.
    pub alone: Option<Alone>,
    pub listener: Option<JoinHandle<()>>,
    pub duty: Option<JoinHandle<()>>,
    pub work: Arc<WorkQueue>,
    pub exited_rx: Receiver<()>,
    pub completer: Completer,
    pub heartbeat: Heartbeat,
    pub dispatcher: Option<DispatcherHandle>,
    pub maintenance: Option<Maintenance>,
    pub wake_rx: Receiver<()>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A claimed job and the registration (process id) it was claimed under.
pub(super) struct Assigned {
    pub job: ClaimedJob,
    pub process_id: i64,
    /// When the claim returned: with the job's `claimed_at` (the backend's
    /// clock) it dates this process's moments on that clock.
    pub claimed: Instant,
}

/// Claimed jobs waiting for a thread, in claim order.
#[derive(Default)]
pub(super) struct WorkQueue {
    state: Mutex<(VecDeque<Assigned>, bool)>,
    ready: Condvar,
}

impl WorkQueue {
    /// Queues jobs and wakes as many sleeping threads.
    pub(super) fn push_all(&self, jobs: Vec<Assigned>, threads: usize) {
        let n = jobs.len();
        lock(&self.state).0.extend(jobs);
        if n >= threads {
            self.ready.notify_all();
        } else {
            for _ in 0..n {
                self.ready.notify_one();
            }
        }
    }

    /// The next job; `None` once closed and empty.
    pub(super) fn pop(&self) -> Option<Assigned> {
        let mut state = lock(&self.state);
        loop {
            if let Some(job) = state.0.pop_front() {
                return Some(job);
            }
            if state.1 {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Jobs waiting for a thread.
    pub(super) fn len(&self) -> usize {
        lock(&self.state).0.len()
    }

    /// Closes the queue and takes what was still waiting; threads finish
    /// their current job and exit.
    pub(super) fn close(&self) -> Vec<Assigned> {
        let mut state = lock(&self.state);
        state.1 = true;
        let waiting = state.0.drain(..).collect();
        drop(state);
        self.ready.notify_all();
        waiting
    }

    /// Takes out the waiting jobs `give_back` picks, keeping the others in
    /// order.
    pub(super) fn take_back(&self, mut give_back: impl FnMut(&Assigned) -> bool) -> Vec<Assigned> {
        let mut state = lock(&self.state);
        let mut back = Vec::new();
        let mut kept = VecDeque::with_capacity(state.0.len());
        for a in state.0.drain(..) {
            if give_back(&a) {
                back.push(a);
            } else {
                kept.push_back(a);
            }
        }
        state.0 = kept;
        back
    }
}

/// A job on a thread right now.
pub(super) struct Running {
    pub job_id: i64,
    pub kind: String,
    pub started: Instant,
    pub deadline: Option<Instant>,
    /// Its context's operator cancellation.
    pub cancel: Arc<AtomicBool>,
}

/// One slot per thread: what it is running. Each thread writes only its
/// own slot, so the locks are never contended by the pool itself.
pub(super) struct Slots(Vec<Mutex<Option<Running>>>);

impl Slots {
    pub(super) fn new(threads: usize) -> Slots {
        Slots((0..threads).map(|_| Mutex::new(None)).collect())
    }

    pub(super) fn set(&self, thread: usize, running: Option<Running>) {
        *lock(&self.0[thread]) = running;
    }

    /// Asks the running jobs among `ids` to stop.
    pub(super) fn cancel(&self, ids: &[i64]) {
        self.each(|running| {
            if ids.contains(&running.job_id) {
                running.cancel.store(true, Ordering::SeqCst);
            }
        });
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

/// A claimed job that never started, to hand back.
#[derive(Debug, Clone)]
pub(crate) struct Unreleased {
    pub process_id: i64,
    pub job_id: i64,
    pub kind: String,
    pub queue: String,
}

impl Unreleased {
    pub(super) fn of(job: &ClaimedJob, process_id: i64) -> Unreleased {
        Unreleased {
            process_id,
            job_id: job.id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
        }
    }
}

/// The cancellations this worker has heard of.
#[derive(Default)]
pub(super) struct Cancels {
    /// Whether `asked` holds anything (read on every job start).
    pub(super) any: AtomicBool,
    /// Jobs asked to stop, until their thread is done with them.
    pub(super) asked: Mutex<HashSet<i64>>,
    /// A check is wanted (a notification or a change was heard).
    pub(super) due: AtomicBool,
    pub(super) last_check: Mutex<Option<Instant>>,
}

impl Cancels {
    /// Whether job `id` was asked to stop.
    pub(super) fn is_asked(&self, id: i64) -> bool {
        self.any.load(Ordering::SeqCst) && lock(&self.asked).contains(&id)
    }

    /// Job `id`'s thread is done with it.
    pub(super) fn forget(&self, id: i64) {
        if self.any.load(Ordering::SeqCst) {
            let mut asked = lock(&self.asked);
            asked.remove(&id);
            self.any.store(!asked.is_empty(), Ordering::SeqCst);
        }
    }

    /// Something was heard that may be a cancellation.
    pub(super) fn wanted(&self) {
        self.due.store(true, Ordering::SeqCst);
    }
}
