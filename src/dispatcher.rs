//! The dispatcher: moves due scheduled executions (delayed jobs, retries) to
//! ready in batches. A batch that comes back full is followed at once by the
//! next; otherwise the loop sleeps `polling_interval`. On PostgreSQL the due
//! rows are locked with `SKIP LOCKED`, so any number of dispatchers can run;
//! on SQLite they take turns on the write lock.

use std::sync::Arc;

use crate::client::Queue;
use crate::config::DispatcherConfig;
use crossbeam_channel::Receiver;

use crate::events::{Events, JobDiscarded};
use crate::process::{ProcessKind, Registration, Service, wakeups};
use crate::store::Store;
use crate::types::Result;

/// Moves due scheduled jobs to ready.
pub struct Dispatcher {
    store: Store,
    config: DispatcherConfig,
    events: Arc<dyn Events>,
    /// Whether it registers its own process row (standalone) or runs inside
    /// a process that has one (a worker, a supervisor).
    register: bool,
    /// Whether it also keeps house: deletes finished jobs past their
    /// `keep_result` and tends the tables (inside a standalone worker, which
    /// has no supervisor to do it).
    housekeeping: bool,
}

/// How often a housekeeping dispatcher deletes expired finished jobs.
const CLEAN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// How often a housekeeping dispatcher tends the tables.
const TEND_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

impl Dispatcher {
    /// A standalone dispatcher on `queue`'s database: it registers a process
    /// row of kind `dispatcher` and heartbeats into it. It reports to the
    /// queue's hooks unless given its own ([`Dispatcher::events`]).
    pub fn new(queue: Queue) -> Dispatcher {
        Dispatcher {
            store: queue.store().clone(),
            config: DispatcherConfig::default(),
            events: Arc::clone(queue.events()),
            register: true,
            housekeeping: false,
        }
    }

    /// A dispatcher inside a process that already registers itself.
    pub(crate) fn embedded(queue: Queue) -> Dispatcher {
        Dispatcher {
            register: false,
            ..Dispatcher::new(queue)
        }
    }

    /// Also deletes finished jobs past their `keep_result` (every minute)
    /// and vacuums the tables where due (every 10 s).
    pub(crate) fn housekeeping(mut self) -> Dispatcher {
        self.housekeeping = true;
        self
    }

    /// Replaces the configuration.
    pub fn config(mut self, config: DispatcherConfig) -> Dispatcher {
        self.config = config;
        self
    }

    /// Reports discarded jobs and its registration to `events` instead of
    /// the queue's hooks.
    pub fn events(mut self, events: impl Events) -> Dispatcher {
        self.events = crate::events::guarded(events);
        self
    }

    /// Moves one batch of due jobs; returns how many moved. Jobs under a
    /// concurrency limit take a slot on the way, or wait blocked, or are
    /// discarded.
    pub fn run_once(&self) -> Result<usize> {
        let mut ready = self.store.scheduled_dispatch(self.config.batch_size)?.len();
        let limited = self
            .store
            .scheduled_dispatch_limited(self.config.batch_size)?;
        ready += limited.ready.len();
        let moved = ready + limited.blocked + limited.discarded.len();
        if moved > 0 {
            log::debug!(
                "dispatched {moved} scheduled jobs: {ready} ready, {} blocked, {} discarded",
                limited.blocked,
                limited.discarded.len()
            );
        }
        for job in &limited.discarded {
            self.events.job_discarded(&JobDiscarded::of(job));
        }
        if ready > 0 {
            wakeups::wake(self.store.url().expose());
        }
        Ok(moved)
    }

    /// Deletes concurrency semaphores nobody touched for their duration and
    /// moves blocked jobs that can now take a slot to ready (what the loop
    /// does every `concurrency_maintenance_interval`); returns how many it
    /// moved.
    pub fn maintain_concurrency(&self) -> Result<usize> {
        let sweep = self.store.concurrency_sweep(self.config.batch_size)?;
        if sweep.expired > 0 || sweep.released > 0 {
            log::info!(
                "concurrency sweep: {} expired semaphores deleted, {} blocked jobs released",
                sweep.expired,
                sweep.released
            );
        }
        if sweep.released > 0 {
            wakeups::wake(self.store.url().expose());
        }
        Ok(sweep.released)
    }

    /// The loop: dispatch, then sleep `polling_interval` unless a batch came
    /// back full; sweep concurrency limits (and keep house) on their own
    /// intervals; back off on errors.
    fn run_loop(&self, stopped: &Receiver<()>) {
        let mut failures = 0u32;
        let (mut cleaned, mut tended) = (std::time::Instant::now(), std::time::Instant::now());
        let mut swept = std::time::Instant::now();
        loop {
            if swept.elapsed() >= self.config.concurrency_maintenance_interval {
                if let Err(error) = self.maintain_concurrency() {
                    log::warn!("concurrency maintenance failed ({error}); retrying later");
                }
                swept = std::time::Instant::now();
            }
            if self.housekeeping && cleaned.elapsed() >= CLEAN_INTERVAL {
                crate::maintenance::clean(&self.store);
                cleaned = std::time::Instant::now();
            }
            if self.housekeeping && tended.elapsed() >= TEND_INTERVAL {
                crate::maintenance::tend(&self.store);
                tended = std::time::Instant::now();
            }
            let wait = match self.run_once() {
                Ok(moved) if moved >= self.config.batch_size => continue,
                Ok(_) => {
                    failures = 0;
                    self.config.polling_interval
                }
                Err(error) => {
                    failures += 1;
                    let wait = (self.config.polling_interval * 2u32.pow(failures.min(5)))
                        .min(std::time::Duration::from_secs(30));
                    log::warn!("dispatching failed ({error}); retrying in {wait:?}");
                    wait
                }
            };
            if stopped.recv_timeout(wait).is_ok() {
                break;
            }
        }
    }

    /// Starts the loop on its own thread and returns at once.
    pub fn start(self) -> Result<DispatcherHandle> {
        self.config.validate()?;
        let registration = if self.register {
            Some(Registration::start(
                &self.store,
                ProcessKind::Dispatcher,
                serde_json::json!({ "batch_size": self.config.batch_size }),
                self.config.heartbeat_interval,
                Arc::clone(&self.events),
            )?)
        } else {
            None
        };
        let service = Service::spawn("solidq-dispatcher", registration, move |stopped| {
            self.run_loop(&stopped);
        })?;
        Ok(DispatcherHandle { service })
    }
}

/// A running dispatcher.
pub struct DispatcherHandle {
    service: Service,
}

impl DispatcherHandle {
    /// Stops the loop, waits for it, and deregisters. Idempotent.
    pub fn stop(mut self) {
        self.service.stop();
    }
}
