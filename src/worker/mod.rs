//! Workers: threads in the user's binary that claim ready jobs and run them.
//!
//! A worker registers a process row and heartbeats into it on its own
//! thread; a poller claims batches of at most the free-thread count (in the
//! order of its queue list, then priority, then id) and hands them to a
//! fixed pool of threads over a crossbeam channel; a completer writes the
//! outcomes in batches, each fenced by its claim. When a thread frees up
//! after a full claim, the poller is woken at once; otherwise it sleeps
//! `polling_interval` or until an enqueue in this process wakes it.
//!
//! Shutdown (SIGTERM, SIGINT, or [`WorkerHandle::stop`]): stop claiming,
//! hand back claimed jobs that never started, let running ones finish for up
//! to `shutdown_timeout`, then release what is still claimed (at-most-once
//! jobs that were running fail instead) and delete the process row in one
//! transaction. The heartbeat runs until that transaction is done.
//!
//! Recorded outcomes are counted in memory and added to the job statistics
//! after each successful heartbeat and once more at the stop (`tally.rs`).

mod cancel;
mod completer;
mod drain;
mod duty;
mod executor;
mod listen;
mod poller;
mod pool;
mod registry;
mod runtime;
mod shutdown;
mod state;
mod stats;
mod tally;
mod transaction;

use std::sync::Arc;
use std::time::Duration;

pub use drain::Drained;
pub use runtime::WorkerHandle;
pub use stats::WorkerStats;

use crate::client::Queue;
use crate::config::WorkerConfig;
use crate::events::Events;
use crate::job::Job;
use crate::types::{Error, Result};
use registry::Registry;

/// Builds and runs a worker.
///
/// ```no_run
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct SendEmail;
/// # impl solidq::Job for SendEmail { const KIND: &'static str = "e";
/// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
/// let queue = solidq::Queue::connect("sqlite://jobs.sqlite3")?;
/// solidq::Worker::new(queue)
///     .queues(["critical", "mail*", "*"])
///     .threads(8)
///     .register::<SendEmail>()
///     .run()?; // blocks until SIGTERM or SIGINT
/// # Ok::<(), solidq::Error>(())
/// ```
pub struct Worker {
    queue: Queue,
    config: WorkerConfig,
    registry: Registry,
    /// Its own hooks; `None`: the queue's.
    events: Option<Arc<dyn Events>>,
}

impl Worker {
    /// A worker on `queue`'s database with the default [`WorkerConfig`].
    pub fn new(queue: Queue) -> Worker {
        let mut registry = Registry::default();
        registry.payload = queue.payload_limit();
        Worker {
            queue,
            config: WorkerConfig::default(),
            registry,
            events: None,
        }
    }

    /// A worker configured by its supervisor through the environment
    /// (`SOLIDQ_DATABASE_URL`, `SOLIDQ_QUEUES`, `SOLIDQ_THREADS`,
    /// `SOLIDQ_SUPERVISOR_ID`, …; see [`WorkerConfig::from_env`] and
    /// [`QueueConfig::from_env`](crate::QueueConfig::from_env)), with a
    /// pool sized for its threads. A `work` subcommand is then one line:
    ///
    /// ```no_run
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct SendEmail;
    /// # impl solidq::Job for SendEmail { const KIND: &'static str = "e";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// solidq::Worker::from_env()?.register::<SendEmail>().run()?;
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn from_env() -> Result<Worker> {
        use crate::config::ENV_DATABASE_URL;
        let url = std::env::var(ENV_DATABASE_URL).map_err(|_| Error::Config {
            origin: "environment".into(),
            message: format!("{ENV_DATABASE_URL} is not set; a supervisor sets it for its workers"),
        })?;
        let config = WorkerConfig::from_env()?;
        let queue = Queue::connect_with(
            &url,
            crate::QueueConfig {
                pool_size: runtime::connections_needed(&config),
                ..crate::QueueConfig::from_env()?
            },
        )?;
        Ok(Worker::new(queue).config(config))
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: WorkerConfig) -> Worker {
        self.config = config;
        self
    }

    /// The queues to claim from, in order (`name`, `prefix*`, `*`).
    pub fn queues<I, S>(mut self, queues: I) -> Worker
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.queues = queues.into_iter().map(Into::into).collect();
        self
    }

    /// The number of threads running jobs.
    pub fn threads(mut self, threads: usize) -> Worker {
        self.config.threads = threads;
        self
    }

    /// The most jobs claimed beyond the idle threads (0: none); see
    /// [`WorkerConfig::prefetch`].
    pub fn prefetch(mut self, prefetch: usize) -> Worker {
        self.config.prefetch = prefetch;
        self
    }

    /// The idle poll interval.
    pub fn polling_interval(mut self, interval: Duration) -> Worker {
        self.config.polling_interval = interval;
        self
    }

    /// The grace period for running jobs at shutdown.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Worker {
        self.config.shutdown_timeout = timeout;
        self
    }

    /// Reports what this worker does (claims, outcomes, releases at
    /// shutdown, its registration, its dispatcher's discards) to `events`
    /// instead of the queue's hooks (see [`crate::events`]).
    pub fn events(mut self, events: impl Events) -> Worker {
        self.events = Some(crate::events::guarded(events));
        self
    }

    /// Gives every job of this worker `value`, read back by type with
    /// [`JobContext::state`](crate::JobContext::state): a database pool, an
    /// HTTP client, the app's settings. One value per type (a second of the
    /// same type replaces the first); wrap a plain type in a newtype to tell
    /// two values of it apart.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Worker {
        self.registry.state.insert(value);
        self
    }

    /// Wraps every execution of a job in `middleware` (see
    /// [`Middleware`](crate::Middleware)); the first added is the
    /// outermost.
    pub fn wrap(mut self, middleware: impl crate::Middleware) -> Worker {
        self.registry.wrap(Arc::new(middleware));
        self
    }

    /// Teaches the worker a job type. Its [`Job::options`] are checked
    /// here ([`JobOptions::validate`](crate::JobOptions::validate)): a value
    /// that cannot work (a concurrency limit of 0, a rate limit period of
    /// zero…) is refused by [`Worker::start`], naming the value and the
    /// kind, before anything starts.
    pub fn register<J: Job>(mut self) -> Worker {
        self.registry.register::<J>();
        self
    }

    /// Starts the worker's threads and returns at once; stop it with
    /// [`WorkerHandle::stop`]. Does not install signal handlers. Refuses,
    /// with nothing started or registered, a configuration that cannot work
    /// ([`WorkerConfig::validate`]: `threads(0)`, no queues…), no job
    /// types, a kind registered twice, or a registered type whose options
    /// cannot work (see [`Worker::register`]), each naming the value.
    pub fn start(self) -> Result<WorkerHandle> {
        if self.registry.is_empty() {
            return Err(Error::NoJobTypes);
        }
        if let Some(error) = self.registry.invalid() {
            return Err(error);
        }
        if let Some(kind) = self.registry.duplicates().first() {
            return Err(Error::InvalidOption {
                option: "job kind",
                value: kind.to_string(),
                reason: "registered by two job types".into(),
            });
        }
        for warning in self.config.validate()?.0 {
            log::warn!("{warning}");
        }
        // A build newer than the database's schema refuses (or, asked to,
        // waits) here rather than failing every claim; a database that is
        // away is an outage, ridden out once started.
        match self.queue.check_schema() {
            Err(error @ Error::SchemaBehind { .. }) => {
                if !self.config.wait_for_migrations {
                    return Err(error);
                }
                let (_never, stop) = crossbeam_channel::bounded::<()>(0);
                self.queue.wait_for_schema("worker", &stop);
            }
            Err(error) => log::debug!("cannot check the schema yet ({error})"),
            Ok(()) => {}
        }
        let wanted = runtime::connections_needed(&self.config);
        if self.queue.pool_size() < wanted {
            log::warn!(
                "the queue's pool has {} connections; this worker's loops and {} threads may want {wanted}: jobs that enqueue will wait for connections (raise QueueConfig::pool_size)",
                self.queue.pool_size(),
                self.config.threads
            );
        }
        // The worker's hooks ride on its queue, so its embedded dispatcher
        // reports to them too.
        let queue = match self.events {
            Some(events) => self.queue.with_events_arc(events),
            None => self.queue,
        };
        runtime::start(queue, self.config, self.registry)
    }

    /// Installs SIGTERM/SIGINT handlers (before anything else), starts the
    /// worker, and blocks until a signal arrives (or the worker stops
    /// itself, which it never does for the database being away); then
    /// shuts down gracefully.
    pub fn run(self) -> Result<()> {
        crate::process::install_signal_handlers()?;
        let signals = crate::process::subscribe_signals();
        if self.config.wait_for_migrations
            && matches!(self.queue.check_schema(), Err(Error::SchemaBehind { .. }))
            && !self.queue.wait_for_schema("worker", &signals)
        {
            return Ok(());
        }
        let handle = self.start()?;
        crossbeam_channel::select! {
            recv(signals) -> _ => {},
            recv(handle.finished()) -> _ => {},
        }
        handle.stop()
    }
}
