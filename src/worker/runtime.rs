//! A running worker: how it starts, the handle that stops it, and what its
//! heartbeat checks. The state its threads share is in `state.rs`, the
//! claim loop in `poller.rs`, the threads in `pool.rs`, the listener in
//! `listen.rs`, the stop in `shutdown.rs`. See the module docs of
//! [`crate::worker`].

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use super::completer::{Backlog, Completer, Message};
use super::executor;
use super::pool;
use super::registry::Registry;
use super::state::{DutyState, Parts, Shared, Slots, WorkQueue};
use super::stats::{Ewma, WorkerStats};
use super::{duty, listen, poller};
use crate::client::Queue;
use crate::config::{EXIT_HARD_TIMEOUT, WorkerConfig};
use crate::dispatcher::Dispatcher;
use crate::job::{ShutdownSignal, Standing};
use crate::lifecycle::ReleaseReason;
use crate::maintenance::{self, MaintenanceConfig, Pruner};
use crate::process::heartbeat::{self, Beat, Heartbeat, Lease};
use crate::process::wakeups::{self, Reach};
use crate::process::{self, ProcessKind};
use crate::store::ClaimQuery;
use crate::types::{Backend, Error, QueuePattern, Result};

/// Connections a worker's own loops use (poller, completer, heartbeat,
/// dispatcher) plus one per thread for jobs that enqueue.
pub(crate) fn connections_needed(config: &WorkerConfig) -> u32 {
    (config.threads + 4) as u32
}

/// A started worker. Dropping it stops it; [`WorkerHandle::stop`] does so
/// and reports how it went.
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

    /// Claims and completion writes so far, with their sizes and times.
    pub fn stats(&self) -> WorkerStats {
        self.shared.stats.snapshot()
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
    let events = Arc::clone(queue.events());
    let process = process::describe(
        ProcessKind::Worker,
        config.name.as_deref(),
        config.supervisor_id,
        serde_json::json!({
            "queues": config.queues,
            "threads": config.threads,
            "kinds": registry.kinds(),
            "version": env!("CARGO_PKG_VERSION"),
            "alive_threshold_ms": config.process_alive_threshold.as_millis() as u64,
            "heartbeat_interval_ms": config.heartbeat_interval.as_millis() as u64,
        }),
    );
    let registered = Instant::now();
    let lease = Arc::new(Lease::new(
        registered,
        config.process_alive_threshold,
        config.heartbeat_interval,
    ));
    // A database that is away (or locked, or full) at the start is an
    // outage like any other: the worker starts unregistered and its poller
    // registers it when the database answers.
    let id = match process::register(&store, &process, events.as_ref()) {
        Ok(id) => id,
        Err(error) if error.is_transient() => {
            lease.revoke();
            log::warn!(
                "worker {} cannot register yet ({error}); it registers when the database answers",
                process.name
            );
            0
        }
        Err(error) => return Err(error),
    };
    log::info!(
        "worker {} (process {id}, pid {}) started: queues {:?}, {} threads, kinds {:?}",
        process.name,
        process.pid,
        config.queues,
        config.threads,
        registry.kinds()
    );

    let (wake, wake_rx) = bounded(1);
    let reach = Arc::new(Reach::new(store.backend() == Backend::Postgres));
    wakeups::subscribe(store.url().expose(), wake.clone(), Arc::clone(&reach));
    let backlog = Arc::new(Backlog::new(2 * config.completion_batch_size, wake.clone()));
    let shared = Arc::new(Shared {
        store: store.clone(),
        slots: Slots::new(config.threads),
        config,
        registry,
        process,
        process_id: Arc::new(AtomicI64::new(id)),
        lease: Arc::clone(&lease),
        inflight: AtomicUsize::new(0),
        wake_when_free: AtomicBool::new(false),
        heard_from: AtomicUsize::new(0),
        shutdown: Arc::new(ShutdownSignal::with_standing(
            Arc::clone(&lease) as Arc<dyn Standing>
        )),
        stopping: AtomicBool::new(false),
        patterns: patterns.clone(),
        reach,
        stats: Arc::default(),
        tally: Arc::default(),
        cancels: Default::default(),
        events,
        claim_time: Ewma::default(),
        backlog,
        wake,
        fatal: Mutex::new(None),
        unreleased: Mutex::new(Vec::new()),
        duty: DutyState::new(),
    });

    let started = (|| -> Result<Parts> {
        let completer = Completer::spawn(
            store.clone(),
            shared.config.completion_batch_size,
            shared.config.completion_flush_interval,
            Arc::clone(&shared.stats),
            Arc::clone(&shared.tally),
            Arc::clone(&shared.events),
            Arc::clone(&shared.backlog),
        )?;
        let work = Arc::new(WorkQueue::default());
        let (exited_tx, exited_rx) = unbounded::<()>();
        for n in 0..shared.config.threads {
            pool::spawn_thread(
                n,
                &shared,
                Arc::clone(&work),
                completer.tx.clone(),
                exited_tx.clone(),
            )?;
        }
        let heartbeat = spawn_heartbeat(&shared, completer.tx.clone())?;
        let listener = listen::spawn(&shared)?;
        let duty = duty::spawn(&shared)?;
        // Without a supervisor, this worker does what one would: dispatch
        // delayed jobs and retries, and keep house (prune dead processes
        // and release their jobs, clean, tend).
        let (dispatcher, maintenance) = if shared.config.standalone {
            let maintenance = maintenance::spawn(
                store.clone(),
                Pruner {
                    own_id: Arc::clone(&shared.process_id),
                    lease: Arc::clone(&shared.lease),
                    spare: None,
                },
                MaintenanceConfig {
                    interval: shared.config.heartbeat_interval,
                    alive_threshold: shared.config.process_alive_threshold,
                    default_max_stalled: shared.config.max_stalled_count,
                },
                Arc::clone(&shared.events),
            )?;
            (
                Some(Dispatcher::embedded(queue.clone()).start()?),
                Some(maintenance),
            )
        } else {
            (None, None)
        };
        Ok(Parts {
            claim: Arc::new(ClaimQuery::new(patterns)),
            alone: None,
            listener: Some(listener),
            duty,
            work,
            exited_rx,
            completer,
            heartbeat,
            dispatcher,
            maintenance,
            wake_rx,
        })
    })();
    let parts = match started {
        Ok(parts) => parts,
        Err(error) => {
            shared.request_stop();
            if id != 0 {
                let reason = ReleaseReason::Shutdown { started: vec![] };
                let _ = store.process_deregister(id, &reason);
            }
            return Err(error);
        }
    };

    let (finished_tx, finished) = bounded(1);
    let poller = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("solidq-poller".into())
            .spawn(move || {
                let result = poller::run(&shared, parts);
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

/// The heartbeat thread; after each beat that worked it asks the completer
/// (`completions`) to add the outcomes counted since to the job statistics:
/// a slow write there must not delay the next beat.
fn spawn_heartbeat(shared: &Arc<Shared>, completions: Sender<Message>) -> Result<Heartbeat> {
    let on_beat = {
        let shared = Arc::clone(shared);
        move |beat: Beat| match beat {
            Beat::Alive { recovered } => {
                check_overdue(&shared);
                // The completer also takes it as "the database answers":
                // outcomes waiting out a back-off are written at once.
                let _ = completions.send(Message::FlushStats);
                if recovered {
                    // Claims resume now, not at the end of a back-off.
                    let _ = shared.wake.try_send(());
                }
            }
            Beat::RowGone(id) => {
                if shared
                    .process_id
                    .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    log::warn!(
                        "process row {id} is gone (pruned while alive?): claiming stops, jobs claimed under it are dropped unstarted (they were released), running ones end without recording their outcome over new claims, then this worker registers again"
                    );
                    // Threads waiting to start a job see the change.
                    shared.lease.notify();
                    let _ = shared.wake.try_send(());
                }
            }
            // The poller registers it, once nothing runs under the old row.
            Beat::Unregistered => {}
        }
    };
    heartbeat::spawn(
        "solidq-worker-heartbeat",
        shared.store.clone(),
        shared.config.heartbeat_interval,
        Arc::clone(&shared.lease),
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
    shared.slots.each(|job| {
        let Some(overdue) = job.deadline.and_then(|d| now.checked_duration_since(d)) else {
            return;
        };
        if let Some(hard) = shared.config.hard_timeout
            && overdue > hard
        {
            log::error!(
                "job {} ({}) is still running {overdue:.1?} past its deadline, beyond the hard timeout of {hard:?}: \
                 exiting with status {EXIT_HARD_TIMEOUT} so the supervisor releases it by the stall rules",
                job.job_id,
                job.kind
            );
            std::process::exit(EXIT_HARD_TIMEOUT);
        }
        log::warn!(
            "job {} ({}) is still running {overdue:.1?} past its deadline (started {:.1?} ago); its thread stays busy until it returns",
            job.job_id,
            job.kind,
            job.started.elapsed()
        );
    });
}
