//! The dispatcher: moves due scheduled executions (delayed jobs, retries) to
//! ready in batches. A batch that comes back full is followed at once by the
//! next; otherwise the loop sleeps `polling_interval`. On PostgreSQL the due
//! rows are locked with `SKIP LOCKED`, so any number of dispatchers can run;
//! on SQLite they take turns on the write lock.
//!
//! A standalone dispatcher ([`Dispatcher::new`]) registers a process row,
//! runs maintenance (pruning dead processes and releasing their jobs,
//! cleaning, tending; see `maintenance`) so a deployment without a
//! supervisor still recovers. Nothing the database does stops it: while it
//! is away the loop backs off, and the process row is registered again if
//! it was pruned meanwhile.

use std::sync::Arc;

use crate::client::Queue;
use crate::config::DispatcherConfig;
use crossbeam_channel::Receiver;

use crate::events::{Events, JobDiscarded};
use crate::maintenance::{self, Maintenance, MaintenanceConfig, Pruner};
use crate::process::{self, ProcessKind, RegistrationSpec, Service, wakeups};
use crate::store::Store;
use crate::types::Result;

/// How soon a dispatcher looks again for a job that was due already when
/// it finished a pass (doubled while passes move nothing).
const AGAIN_SOON: std::time::Duration = std::time::Duration::from_millis(2);

/// Moves due scheduled jobs to ready.
pub struct Dispatcher {
    store: Store,
    config: DispatcherConfig,
    events: Arc<dyn Events>,
    /// Whether it registers its own process row and runs maintenance
    /// (standalone), or runs inside a process that does both (a worker, a
    /// supervisor).
    register: bool,
}

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
        }
    }

    /// A dispatcher inside a process that already registers itself.
    pub(crate) fn embedded(queue: Queue) -> Dispatcher {
        Dispatcher {
            register: false,
            ..Dispatcher::new(queue)
        }
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

    /// The loop: dispatch, then sleep until the next scheduled job is due
    /// (at most `polling_interval`) unless a batch came back full; sweep concurrency limits (and keep house) on their own
    /// intervals; back off on errors.
    fn run_loop(&self, stopped: &Receiver<()>) {
        let mut failures = 0u32;
        let mut late = 0u32;
        let mut swept = std::time::Instant::now();
        loop {
            if swept.elapsed() >= self.config.concurrency_maintenance_interval {
                if let Err(error) = self.maintain_concurrency() {
                    log::warn!("concurrency maintenance failed ({error}); retrying later");
                }
                swept = std::time::Instant::now();
            }
            let wait = match self.run_once() {
                Ok(moved) if moved >= self.config.batch_size => continue,
                Ok(moved) => {
                    failures = 0;
                    self.until_next_due(moved, &mut late)
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

    /// How long to sleep after a pass that moved `moved` jobs: until the
    /// next scheduled job is due (a retry, a delay, a job sent back until
    /// its rate limit's window opens), so it becomes ready on time rather
    /// than at the next poll, and at most `polling_interval` (a job
    /// scheduled meanwhile by another process is seen by then).
    fn until_next_due(&self, moved: usize, late: &mut u32) -> std::time::Duration {
        let poll = self.config.polling_interval;
        match self.store.scheduled_next_due() {
            // Due already: it became due just after the pass read the
            // clock. Look again soon, doubling the wait while passes move
            // nothing (a row that could never move would otherwise spin).
            Ok(Some(next)) if next.is_zero() => {
                *late = if moved == 0 { *late + 1 } else { 0 };
                (AGAIN_SOON * 2u32.pow((*late).min(10))).min(poll)
            }
            Ok(Some(next)) => {
                *late = 0;
                next.min(poll)
            }
            Ok(None) => poll,
            Err(error) => {
                log::debug!("cannot read when the next scheduled job is due ({error})");
                poll
            }
        }
    }

    /// Starts the loop on its own thread and returns at once (standalone:
    /// after registering, with its maintenance thread).
    pub fn start(self) -> Result<DispatcherHandle> {
        self.config.validate()?;
        // Refused on a database that lacks migrations (one away is an
        // outage: ridden out once started).
        if let Err(error @ crate::Error::SchemaBehind { .. }) = self.store.check_schema() {
            return Err(error);
        }
        let registration = self.register.then(|| RegistrationSpec {
            store: self.store.clone(),
            row: process::describe(
                ProcessKind::Dispatcher,
                None,
                None,
                serde_json::json!({
                    "batch_size": self.config.batch_size,
                    "alive_threshold_ms": self.config.process_alive_threshold.as_millis() as u64,
                    "heartbeat_interval_ms": self.config.heartbeat_interval.as_millis() as u64,
                }),
            ),
            interval: self.config.heartbeat_interval,
            threshold: self.config.process_alive_threshold,
            events: Arc::clone(&self.events),
        });
        let (store, events) = (self.store.clone(), Arc::clone(&self.events));
        let maintenance_config = MaintenanceConfig {
            interval: self.config.heartbeat_interval,
            alive_threshold: self.config.process_alive_threshold,
            default_max_stalled: self.config.max_stalled_count,
        };
        let service = Service::spawn("solidq-dispatcher", registration, move |stopped| {
            self.run_loop(&stopped);
        })?;
        let maintenance = match service.registration() {
            Some(registration) => Some(maintenance::spawn(
                store,
                Pruner {
                    own_id: Arc::clone(registration.id()),
                    lease: Arc::clone(registration.lease()),
                    spare: None,
                },
                maintenance_config,
                events,
            )?),
            None => None,
        };
        Ok(DispatcherHandle {
            service,
            maintenance,
        })
    }

    /// Installs SIGTERM/SIGINT handlers, starts standalone, and runs until a
    /// signal arrives (never stopping for the database being away).
    pub fn run(self) -> Result<()> {
        process::install_signal_handlers()?;
        let signals = process::subscribe_signals();
        let handle = self.start()?;
        crossbeam_channel::select! {
            recv(signals) -> _ => {},
            recv(handle.service.done()) -> _ => {},
        }
        handle.stop()
    }
}

/// A running dispatcher.
pub struct DispatcherHandle {
    service: Service,
    maintenance: Option<Maintenance>,
}

impl DispatcherHandle {
    /// Stops the loop, waits for it, and deregisters. Idempotent.
    pub fn stop(mut self) -> Result<()> {
        if let Some(mut maintenance) = self.maintenance.take() {
            maintenance.stop();
        }
        self.service.stop()
    }
}
