//! A running worker: the poller loop, the executor threads, and the
//! shutdown sequence. See the module docs of [`crate::worker`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use super::QueuePattern;
use super::completer::{Completer, Message};
use super::executor;
use super::registry::Registry;
use super::stats::Stats;
use crate::client::Queue;
use crate::config::{EXIT_HARD_TIMEOUT, WorkerConfig};
use crate::dispatcher::{Dispatcher, DispatcherHandle};
use crate::error::{Error, Result};
use crate::job::{Delivery, ShutdownSignal, StoredOptions};
use crate::process::heartbeat::{Beat, Heartbeat};
use crate::process::{self, ProcessKind, wakeups};
use crate::store::{
    ClaimQuery, ClaimedJob, Completion, Heard, Listener, NewProcess, ReleaseReason, Store,
};

/// Connections a worker's own loops use (poller, completer, heartbeat,
/// dispatcher) plus one per thread for jobs that enqueue.
pub(crate) fn connections_needed(config: &WorkerConfig) -> u32 {
    (config.threads + 4) as u32
}

/// A job currently on an executor thread.
struct Running {
    kind: String,
    started: Instant,
    deadline: Option<Instant>,
    at_most_once: bool,
}

/// State shared by the worker's threads.
struct Shared {
    store: Store,
    config: WorkerConfig,
    registry: Registry,
    process: NewProcess,
    /// The current registration; 0 while unregistered (pruned while alive).
    process_id: Arc<AtomicI64>,
    /// Claimed and not yet done executing (queued or running).
    inflight: AtomicUsize,
    /// Set when the last claim filled every free thread: more work is
    /// probably waiting, so a thread that frees up wakes the poller.
    wake_when_free: AtomicBool,
    running: Mutex<HashMap<i64, Running>>,
    shutdown: Arc<ShutdownSignal>,
    stopping: AtomicBool,
    /// The queue list, to tell which notifications concern this worker.
    patterns: Vec<QueuePattern>,
    /// Whether a listener currently wakes the poller for new jobs; idle
    /// polling is then only a safety net.
    listening: AtomicBool,
    stats: Arc<Stats>,
    wake: Sender<()>,
    /// Why the worker stopped itself, if it did.
    fatal: Mutex<Option<Error>>,
}

impl Shared {
    fn request_stop(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            self.shutdown.request(self.config.shutdown_timeout);
        }
        let _ = self.wake.try_send(());
    }

    fn process_id(&self) -> i64 {
        self.process_id.load(Ordering::SeqCst)
    }
}

/// A started worker. Dropping it does not stop it; call [`WorkerHandle::stop`].
pub struct WorkerHandle {
    shared: Arc<Shared>,
    poller: Option<JoinHandle<Result<()>>>,
    finished: Receiver<()>,
}

impl WorkerHandle {
    /// The id of the worker's process row (`None` while it is re-registering
    /// after being pruned).
    pub fn process_id(&self) -> Option<i64> {
        Some(self.shared.process_id()).filter(|id| *id != 0)
    }

    /// Starts a graceful shutdown without waiting for it.
    pub fn request_stop(&self) {
        self.shared.request_stop();
    }

    /// Shuts down gracefully and waits until done: stop claiming, let
    /// running jobs finish within `shutdown_timeout`, release the rest,
    /// deregister. Idempotent. Returns the error that made the worker stop
    /// itself, if one did.
    pub fn stop(mut self) -> Result<()> {
        self.stop_and_wait()
    }

    fn stop_and_wait(&mut self) -> Result<()> {
        self.shared.request_stop();
        match self.poller.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(Error::Thread {
                    name: "solidq-poller".into(),
                    source: std::io::Error::other("the poller thread panicked"),
                })
            }),
            None => Ok(()),
        }
    }

    /// Receives a message when the worker has stopped on its own.
    pub(crate) fn finished(&self) -> &Receiver<()> {
        &self.finished
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if self.poller.is_some() {
            log::debug!("worker handle dropped while running; stopping it");
            let _ = self.stop_and_wait();
        }
    }
}

/// Registers the process and starts every thread.
pub(crate) fn start(
    queue: Queue,
    config: WorkerConfig,
    registry: Registry,
) -> Result<WorkerHandle> {
    executor::install_panic_capture();
    let patterns = config
        .queues
        .iter()
        .map(|q| QueuePattern::parse(q))
        .collect::<Result<Vec<_>>>()?;
    let store = queue.store().clone();
    let process = process::describe(
        ProcessKind::Worker,
        config.name.as_deref(),
        config.supervisor_id,
        serde_json::json!({
            "queues": config.queues,
            "threads": config.threads,
            "kinds": registry.kinds(),
            "version": env!("CARGO_PKG_VERSION"),
        }),
    );
    let id = process::register(&store, &process)?;
    log::info!(
        "worker {} (process {id}, pid {}) started: queues {:?}, {} threads, kinds {:?}",
        process.name,
        process.pid,
        config.queues,
        config.threads,
        registry.kinds()
    );

    let (wake, wake_rx) = bounded(1);
    wakeups::subscribe(store.url().expose(), wake.clone());
    let shared = Arc::new(Shared {
        store: store.clone(),
        config,
        registry,
        process,
        process_id: Arc::new(AtomicI64::new(id)),
        inflight: AtomicUsize::new(0),
        wake_when_free: AtomicBool::new(false),
        running: Mutex::new(HashMap::new()),
        shutdown: Arc::new(ShutdownSignal::default()),
        stopping: AtomicBool::new(false),
        patterns: patterns.clone(),
        listening: AtomicBool::new(false),
        stats: Arc::default(),
        wake,
        fatal: Mutex::new(None),
    });

    let started = (|| -> Result<Parts> {
        let completer = Completer::spawn(
            store.clone(),
            shared.config.completion_batch_size,
            shared.config.completion_flush_interval,
            Arc::clone(&shared.stats),
        )?;
        let (jobs_tx, jobs_rx) = unbounded::<(ClaimedJob, i64)>();
        let (exited_tx, exited_rx) = unbounded::<()>();
        for n in 0..shared.config.threads {
            spawn_executor(
                n,
                &shared,
                jobs_rx.clone(),
                completer.tx.clone(),
                exited_tx.clone(),
            )?;
        }
        let heartbeat = spawn_heartbeat(&shared)?;
        let listener = spawn_listener(&shared)?;
        let dispatcher = if shared.config.dispatch_scheduled {
            Some(Dispatcher::embedded(queue.clone()).cleaning().start()?)
        } else {
            None
        };
        Ok(Parts {
            claim: ClaimQuery::new(patterns),
            listener: Some(listener),
            jobs_tx,
            jobs_rx,
            exited_rx,
            completer,
            heartbeat,
            dispatcher,
            wake_rx,
        })
    })();
    let parts = match started {
        Ok(parts) => parts,
        Err(error) => {
            let _ = store.process_deregister(
                id,
                &ReleaseReason::Shutdown {
                    running_at_most_once: vec![],
                },
            );
            return Err(error);
        }
    };

    let (finished_tx, finished) = bounded(1);
    let poller = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("solidq-poller".into())
            .spawn(move || {
                let result = poll(&shared, parts);
                let _ = finished_tx.send(());
                result
            })
            .map_err(|source| Error::Thread {
                name: "solidq-poller".into(),
                source,
            })?
    };
    Ok(WorkerHandle {
        shared,
        poller: Some(poller),
        finished,
    })
}

/// What the poller thread owns.
struct Parts {
    claim: ClaimQuery,
    listener: Option<JoinHandle<()>>,
    jobs_tx: Sender<(ClaimedJob, i64)>,
    jobs_rx: Receiver<(ClaimedJob, i64)>,
    exited_rx: Receiver<()>,
    completer: Completer,
    heartbeat: Heartbeat,
    dispatcher: Option<DispatcherHandle>,
    wake_rx: Receiver<()>,
}

fn spawn_executor(
    n: usize,
    shared: &Arc<Shared>,
    jobs: Receiver<(ClaimedJob, i64)>,
    completions: Sender<Message>,
    exited: Sender<()>,
) -> Result<()> {
    let shared = Arc::clone(shared);
    let name = format!("solidq-worker-{n}");
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            executor::arm_panic_capture();
            for (job, process_id) in jobs.iter() {
                let options = StoredOptions::parse(&job.options);
                let started = Instant::now();
                lock(&shared.running).insert(
                    job.id,
                    Running {
                        kind: job.kind.clone(),
                        started,
                        deadline: executor::deadline(&options, started),
                        at_most_once: Delivery::from_column(&job.delivery) == Delivery::AtMostOnce,
                    },
                );
                let execution =
                    executor::execute(&job, &options, started, &shared.registry, &shared.shutdown);
                match &execution.error {
                    None => log::debug!(
                        "job {} ({}) succeeded in {:?}",
                        job.id,
                        job.kind,
                        execution.elapsed
                    ),
                    Some((kind, message)) => log::warn!(
                        "job {} ({}) attempt {} failed after {:?}: {kind}: {message}",
                        job.id,
                        job.kind,
                        job.attempts + 1,
                        execution.elapsed
                    ),
                }
                let _ = completions.send(Message::Done(Completion {
                    job_id: job.id,
                    process_id,
                    outcome: execution.outcome,
                }));
                lock(&shared.running).remove(&job.id);
                shared.inflight.fetch_sub(1, Ordering::SeqCst);
                if shared.wake_when_free.load(Ordering::SeqCst) {
                    let _ = shared.wake.try_send(());
                }
            }
            let _ = exited.send(());
        })
        .map(drop)
        .map_err(|source| Error::Thread { name, source })
}

fn spawn_heartbeat(shared: &Arc<Shared>) -> Result<Heartbeat> {
    let on_beat = {
        let shared = Arc::clone(shared);
        move |beat: Beat| match beat {
            Beat::Alive => check_overdue(&shared),
            Beat::RowGone(id) => {
                if shared
                    .process_id
                    .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    log::warn!(
                        "process row {id} is gone (pruned while alive?): claiming stops until running jobs end, then this worker registers again; their results will not be recorded over new claims"
                    );
                    let _ = shared.wake.try_send(());
                }
            }
            Beat::Lost(error) => {
                log::error!("{error}");
                lock(&shared.fatal).get_or_insert(error);
                shared.request_stop();
            }
        }
    };
    Heartbeat::spawn(
        "solidq-heartbeat",
        shared.store.clone(),
        shared.config.heartbeat_interval,
        shared.config.process_alive_threshold,
        Arc::clone(&shared.process_id),
        on_beat,
    )
}

/// Warns about every job running past its deadline (its thread cannot be
/// taken back), and with a hard timeout, exits the process once one is
/// that far past: the supervisor then releases or fails it by the stall
/// rules, and a fresh worker takes the thread's place.
fn check_overdue(shared: &Shared) {
    let now = Instant::now();
    let running = lock(&shared.running);
    for (id, job) in running.iter() {
        let Some(overdue) = job.deadline.and_then(|d| now.checked_duration_since(d)) else {
            continue;
        };
        if let Some(hard) = shared.config.hard_timeout
            && overdue > hard
        {
            log::error!(
                "job {id} ({}) is still running {overdue:.1?} past its deadline, beyond the hard timeout of {hard:?}: \
                 exiting with status {EXIT_HARD_TIMEOUT} so the supervisor releases it by the stall rules",
                job.kind
            );
            std::process::exit(EXIT_HARD_TIMEOUT);
        }
        log::warn!(
            "job {id} ({}) is still running {overdue:.1?} past its deadline (started {:.1?} ago); its thread stays busy until it returns",
            job.kind,
            job.started.elapsed()
        );
    }
}

/// How long a listener waits before checking whether the worker stops.
const LISTEN_SLICE: Duration = Duration::from_millis(200);

/// The listener thread: wakes the poller when jobs become ready on one of
/// its queues (PostgreSQL) or the database changed (SQLite). Reopens a
/// broken listener with a backoff; meanwhile the poller polls at the normal
/// interval. After (re)opening, it wakes the poller once, for anything
/// enqueued while nobody listened.
fn spawn_listener(shared: &Arc<Shared>) -> Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("solidq-listener".into())
        .spawn(move || {
            let mut listener: Option<Box<dyn Listener>> = None;
            let mut failures = 0u32;
            while !shared.stopping.load(Ordering::SeqCst) {
                let Some(active) = listener.as_mut() else {
                    match shared.store.listener(shared.config.sqlite_watch_interval) {
                        Ok(opened) => {
                            listener = Some(opened);
                            failures = 0;
                            shared.listening.store(true, Ordering::SeqCst);
                            let _ = shared.wake.try_send(());
                        }
                        Err(error) => {
                            failures += 1;
                            let pause = backoff(Duration::from_millis(500), failures);
                            log::warn!("cannot listen for new jobs ({error}); polling meanwhile, retrying in {pause:?}");
                            sleep_unless_stopping(&shared, pause);
                        }
                    }
                    continue;
                };
                match active.wait(LISTEN_SLICE) {
                    Ok(Heard::Nothing) => {}
                    Ok(Heard::Changes) => {
                        let _ = shared.wake.try_send(());
                    }
                    Ok(Heard::Queues(queues)) => {
                        if queues.iter().any(|q| shared.patterns.iter().any(|p| p.matches(q))) {
                            let _ = shared.wake.try_send(());
                        }
                    }
                    Err(error) => {
                        log::warn!("the listener broke ({error}); polling until it is back");
                        shared.listening.store(false, Ordering::SeqCst);
                        listener = None;
                    }
                }
            }
        })
        .map_err(|source| Error::Thread {
            name: "solidq-listener".into(),
            source,
        })
}

fn sleep_unless_stopping(shared: &Shared, pause: Duration) {
    let until = Instant::now() + pause;
    while !shared.stopping.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(LISTEN_SLICE.min(until - Instant::now()));
    }
}

/// The claim loop, then the shutdown sequence.
fn poll(shared: &Arc<Shared>, mut parts: Parts) -> Result<()> {
    let capacity = shared.config.threads + shared.config.prefetch;
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
            let free = capacity.saturating_sub(shared.inflight.load(Ordering::SeqCst));
            let worth_it =
                |free: usize, waiting: usize| free > 0 && (free * 2 >= capacity || waiting == 0);
            if free > 0 && (!backlog || worth_it(free, parts.jobs_tx.len())) {
                let started = Instant::now();
                match shared.store.ready_claim(&parts.claim, process_id, free) {
                    Ok(jobs) => {
                        shared.stats.claim(jobs.len(), started.elapsed());
                        failures = 0;
                        backlog = jobs.len() == free;
                        shared.inflight.fetch_add(jobs.len(), Ordering::SeqCst);
                        for job in jobs {
                            log::debug!(
                                "claimed job {} ({}) from {} at priority {}",
                                job.id,
                                job.kind,
                                job.queue_name,
                                job.priority
                            );
                            let _ = parts.jobs_tx.send((job, process_id));
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
            if backlog && worth_it(free, parts.jobs_tx.len()) {
                continue;
            }
        }
        let _ = parts.wake_rx.recv_timeout(wait);
    }
    shut_down(shared, &mut parts)
}

/// After the row was pruned: once nothing runs under the old registration,
/// register afresh.
fn reregister(shared: &Shared) {
    if shared.inflight.load(Ordering::SeqCst) > 0 {
        return;
    }
    match process::register(&shared.store, &shared.process) {
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

fn backoff(base: Duration, failures: u32) -> Duration {
    (base * 2u32.saturating_pow(failures.min(5))).min(Duration::from_secs(30))
}

fn shut_down(shared: &Arc<Shared>, parts: &mut Parts) -> Result<()> {
    let grace_end = Instant::now() + shared.config.shutdown_timeout;
    let process_id = shared.process_id();
    log::info!(
        "worker {} stopping: {} jobs in flight, waiting up to {:?}",
        shared.process.name,
        shared.inflight.load(Ordering::SeqCst),
        shared.config.shutdown_timeout
    );
    if let Some(dispatcher) = parts.dispatcher.take() {
        dispatcher.stop();
    }
    if let Some(listener) = parts.listener.take() {
        let _ = listener.join();
    }

    // Claimed but never started: hand back at once so other workers can
    // take them during our grace period.
    let unstarted: Vec<(ClaimedJob, i64)> = parts.jobs_rx.try_iter().collect();
    let (never_run, _) = unbounded();
    parts.jobs_tx = never_run;
    shared.inflight.fetch_sub(unstarted.len(), Ordering::SeqCst);
    let mut by_process: HashMap<i64, Vec<i64>> = HashMap::new();
    for (job, pid) in &unstarted {
        by_process.entry(*pid).or_default().push(job.id);
    }
    for (pid, ids) in by_process {
        match shared.store.claimed_release(pid, &ids) {
            Ok(released) => log::info!(
                "released {} claimed jobs that had not started: {released:?}",
                released.len()
            ),
            Err(error) => log::warn!(
                "cannot release unstarted jobs {ids:?} yet ({error}); deregistration will"
            ),
        }
    }

    // Let running jobs finish.
    let mut exited = 0;
    while exited < shared.config.threads {
        if parts.exited_rx.recv_deadline(grace_end).is_err() {
            break;
        }
        exited += 1;
    }
    parts
        .completer
        .stop(grace_end.max(Instant::now() + Duration::from_secs(2)));

    // Release what is still claimed and deregister, in one transaction.
    let mut result = Ok(());
    if process_id != 0 {
        let running_at_most_once: Vec<i64> = lock(&shared.running)
            .iter()
            .filter(|(_, r)| r.at_most_once)
            .map(|(id, _)| *id)
            .collect();
        let still_running = lock(&shared.running).len();
        let reason = ReleaseReason::Shutdown {
            running_at_most_once,
        };
        match shared.store.process_deregister(process_id, &reason) {
            Ok(report) => {
                if !report.entries.is_empty() {
                    log::warn!(
                        "shutdown timeout: {still_running} jobs still running; released {:?} to ready, failed at-most-once {:?}",
                        report.released(),
                        report.failed()
                    );
                }
            }
            Err(error) => {
                log::error!(
                    "cannot deregister process {process_id}: {error}; its claims will be released when it is pruned"
                );
                result = Err(error);
            }
        }
    }
    parts.heartbeat.stop();
    let longest = lock(&shared.running)
        .values()
        .map(|r| r.started.elapsed())
        .max();
    if let Some(longest) = longest {
        log::warn!(
            "worker stopped with jobs still running on their threads (longest for {longest:?})"
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
