//! The supervisor: a separate process (`solidq supervisor --config
//! solidq.toml`, or [`Supervisor::run`] in your own binary, or
//! [`Supervisor::start`] on a thread of it) that keeps the
//! configured worker processes running, runs the dispatcher and the
//! scheduler of its recurring tasks, and prunes dead processes.
//!
//! * **Children.** Each `[[workers]]` entry is spawned `processes` times
//!   with its settings in the environment (see
//!   [`crate::Worker::from_env`]); a child that exits is restarted, after a
//!   doubling delay when children keep dying within a second.
//! * **Immediate recovery.** When a child exits without deregistering, the
//!   supervisor (which knows its pid) prunes its process row at once, in one
//!   transaction with releasing its claimed jobs, instead of waiting for the
//!   heartbeat threshold.
//! * **Pruning by heartbeat.** Every heartbeat interval, every process row
//!   (on any host) whose heartbeat is older than `process_alive_threshold`
//!   is pruned the same way; claims whose process row is missing are
//!   released too. Several supervisors can run: each dead process is pruned
//!   by exactly one of them.
//! * **Release rules.** A released job goes back to ready with
//!   `stalled_count + 1`, logged at warn level and reported to
//!   [`Events::job_stalled`]; past its `max_stalled_count`, or when it is
//!   at-most-once, it fails instead.
//! * **Stopping.** SIGTERM/SIGINT under [`Supervisor::run`], or
//!   [`SupervisorHandle::stop`]: forward SIGTERM to every child, wait
//!   `shutdown_timeout` plus [`SHUTDOWN_MARGIN`](crate::config::SHUTDOWN_MARGIN) for them to finish their
//!   jobs and deregister, SIGKILL what is left and release its claims,
//!   deregister, return. A child notices its supervisor's death (Linux
//!   parent-death signal, and a changed parent pid) and shuts down
//!   gracefully.

mod children;
mod running;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use running::SupervisorHandle;

use crate::client::Queue;
use crate::config::{QueueConfig, SupervisorConfig};
use crate::dispatcher::Dispatcher;
use crate::events::{Events, default_events};
use crate::job::Job;
use crate::maintenance::{self, MaintenanceConfig, Pruner};
use crate::process::{self, ProcessKind, Registration, RegistrationSpec};
use crate::scheduler::Scheduler;
use crate::store::NewProcess;
use crate::types::{Error, Result};
use children::Children;
use running::Running;

/// How often the supervisor checks on its children.
const TICK: Duration = Duration::from_millis(50);

/// What `solidq check` found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckReport {
    /// The database, password redacted.
    pub database: String,
    /// Worker processes the configuration asks for.
    pub processes: usize,
    /// Settings that work, probably not as intended.
    pub warnings: Vec<String>,
}

/// Runs the worker processes of a [`SupervisorConfig`], the dispatcher and
/// the pruner.
pub struct Supervisor {
    config: SupervisorConfig,
    events: Arc<dyn Events>,
    /// Job types its scheduler knows (see [`Supervisor::register`]).
    kinds: Vec<fn(Scheduler) -> Scheduler>,
}

impl Supervisor {
    /// A supervisor for `config`.
    pub fn new(config: SupervisorConfig) -> Supervisor {
        Supervisor {
            config,
            events: default_events(),
            kinds: Vec::new(),
        }
    }

    /// Teaches its scheduler job type `J`: recurring tasks of that kind get
    /// the type's options and concurrency key, and their arguments are
    /// checked against it. (`solidq supervisor` knows no job types: its
    /// recurring jobs get the queue's defaults.)
    pub fn register<J: Job>(mut self) -> Supervisor {
        self.kinds.push(|scheduler| scheduler.register::<J>());
        self
    }

    /// The scheduler of `[recurring.*]`, if there are any.
    fn scheduler(&self, queue: &Queue) -> Result<Option<Scheduler>> {
        let tasks = self.config.recurring_tasks("configuration")?;
        if tasks.is_empty() {
            return Ok(None);
        }
        let scheduler = Scheduler::embedded(queue.clone()).tasks(tasks);
        Ok(Some(self.kinds.iter().fold(scheduler, |s, teach| teach(s))))
    }

    /// Reports to `events` (see [`crate::events`]): stalled jobs and
    /// pruned processes, jobs released when it kills a worker at shutdown,
    /// its registration, and what its dispatcher and scheduler do (discards,
    /// recurring ticks fired and skipped, the recurring jobs enqueued).
    /// Defaults to [`LogEvents`](crate::LogEvents).
    pub fn events(mut self, events: impl Events) -> Supervisor {
        self.events = crate::events::guarded(events);
        self
    }

    /// Validates everything `run` would need, without starting anything:
    /// the settings, the database (reachable and migrated), and the worker
    /// programs (found and executable).
    pub fn check(&self) -> Result<CheckReport> {
        let (_, report) = self.prepare()?;
        Ok(report)
    }

    fn prepare(&self) -> Result<(Queue, CheckReport)> {
        let origin = "configuration";
        let warnings = self.config.validate(origin)?.0;
        for (i, group) in self.config.workers.iter().enumerate() {
            find_program(&group.command[0]).map_err(|message| Error::Config {
                origin: origin.into(),
                message: format!("workers[{i}].command: {message}"),
            })?;
        }
        let url = self.config.database_url()?;
        let queue = Queue::connect_with(
            url.expose(),
            QueueConfig {
                pool_size: 6,
                sqlite_synchronous: self.config.sqlite_synchronous,
                max_payload_bytes: self.config.max_payload_bytes,
                ..QueueConfig::default()
            },
        )?
        .with_events_arc(Arc::clone(&self.events));
        queue.check_schema()?;
        if let Some(scheduler) = self.scheduler(&queue)? {
            scheduler.check()?;
        }
        let report = CheckReport {
            database: url.redacted(),
            processes: self.config.workers.iter().map(|g| g.processes).sum(),
            warnings,
        };
        Ok((queue, report))
    }

    /// Checks everything (nothing is started if anything is wrong), starts
    /// supervising on its own thread and returns at once; stop it with
    /// [`SupervisorHandle::stop`]. Does not install signal handlers (see
    /// [`Supervisor::run`]). Once started it never stops itself for the
    /// database (an outage of any length, a locked SQLite file, a full
    /// disk, a failover): it keeps its children up and carries on, or
    /// registers again, when the database answers.
    pub fn start(self) -> Result<SupervisorHandle> {
        let (queue, report) = self.prepare()?;
        for warning in &report.warnings {
            log::warn!("{warning}");
        }
        let store = queue.store().clone();
        let row = process::describe(
            ProcessKind::Supervisor,
            None,
            None,
            serde_json::json!({
                "workers": self.config.workers.iter().map(|g| serde_json::json!({
                    "command": g.command, "processes": g.processes, "queues": g.queues, "threads": g.threads,
                })).collect::<Vec<_>>(),
                "version": env!("CARGO_PKG_VERSION"),
                "alive_threshold_ms": self.config.process_alive_threshold.as_millis() as u64,
                "heartbeat_interval_ms": self.config.heartbeat_interval.as_millis() as u64,
            }),
        );
        let registration = Registration::start(RegistrationSpec {
            store: store.clone(),
            row: row.clone(),
            interval: self.config.heartbeat_interval,
            threshold: self.config.process_alive_threshold,
            events: Arc::clone(&self.events),
        })?;
        let id = registration.id().load(Ordering::SeqCst);
        log::info!(
            "supervisor {} (process {id}, pid {}) started on {}: {} worker processes",
            row.name,
            row.pid,
            report.database,
            report.processes
        );
        let running = self.start_loops(&queue, &row, registration)?;
        running.spawn()
    }

    /// Starts the dispatcher, the scheduler and the maintenance loop of a
    /// registered supervisor. On an error, what started stops again and
    /// the registration is dropped (deregistered).
    fn start_loops(
        self,
        queue: &Queue,
        row: &NewProcess,
        registration: Registration,
    ) -> Result<Running> {
        let store = queue.store().clone();
        let children = Children::new(&self.config, registration.id().load(Ordering::SeqCst));
        let dispatcher = Dispatcher::embedded(queue.clone())
            .config(self.config.dispatcher_config())
            .start()?;
        let scheduler = match self.scheduler(queue)? {
            Some(scheduler) => Some(scheduler.start()?),
            None => None,
        };
        let maintenance = maintenance::spawn(
            store.clone(),
            Pruner {
                own_id: Arc::clone(registration.id()),
                lease: Arc::clone(registration.lease()),
                spare: Some(children.spare(row.hostname.clone())),
            },
            MaintenanceConfig {
                interval: self.config.heartbeat_interval,
                alive_threshold: self.config.process_alive_threshold,
                default_max_stalled: self.config.max_stalled_count,
            },
            Arc::clone(&self.events),
        )?;
        Ok(Running {
            config: self.config,
            events: self.events,
            store,
            name: row.name.clone(),
            hostname: row.hostname.clone(),
            registration,
            children,
            dispatcher,
            scheduler,
            maintenance,
        })
    }

    /// Installs SIGTERM/SIGINT handlers first, checks everything (nothing is
    /// started if anything is wrong), then supervises until a signal
    /// arrives. A database that does not answer at the start (a transient
    /// error: refused, locked, full) is waited for, with a line every
    /// `STILL_WAITING_EVERY` (30 s); once started, nothing the database does
    /// stops it. What `solidq supervisor` runs.
    pub fn run(self) -> Result<()> {
        process::install_signal_handlers()?;
        let signals = process::subscribe_signals();
        let mut said: Option<std::time::Instant> = None;
        let mut pause = Duration::from_millis(100);
        loop {
            match self.prepare() {
                Ok(_) => break,
                Err(error)
                    if error.is_transient()
                        || (self.config.wait_for_migrations
                            && matches!(error, Error::SchemaBehind { .. })) =>
                {
                    if said.is_none_or(|at| at.elapsed() >= STILL_WAITING_EVERY) {
                        // One line, whatever the client library printed.
                        let text = error.to_string();
                        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                        if error.is_transient() {
                            log::warn!("the database does not answer yet ({text}); waiting for it");
                        } else {
                            log::warn!("waiting for migrations (wait_for_migrations): {text}");
                        }
                        said = Some(std::time::Instant::now());
                    }
                    if signals.recv_timeout(pause).is_ok() {
                        return Ok(());
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(error) => return Err(error),
            }
        }
        let handle = self.start()?;
        crossbeam_channel::select! {
            recv(signals) -> _ => {},
            // Only a panic ends the supervising thread on its own.
            recv(handle.finished()) -> _ => {},
        }
        handle.stop()
    }
}

/// How often a supervisor waiting for the database at its start says so
/// again.
pub const STILL_WAITING_EVERY: Duration = Duration::from_secs(30);

/// Finds `program` as the OS would run it: a path, or a name on `PATH`.
fn find_program(program: &str) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        return if executable(std::path::Path::new(program)) {
            Ok(())
        } else {
            Err(format!("{program:?} is not an executable file"))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(program))) {
        Ok(())
    } else {
        Err(format!("program {program:?} is not on PATH"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEFAULT_SHUTDOWN_TIMEOUT, SHUTDOWN_MARGIN, STOP_GRACE};

    /// What a supervisor does after its wait for the children (SIGKILL the
    /// rest, release their jobs, stop its loops, deregister) takes
    /// milliseconds; a second is the allowance kept for it.
    const TEARDOWN_ALLOWANCE: Duration = Duration::from_secs(1);

    #[test]
    fn the_default_stop_fits_in_docker_stops_grace() {
        let stop = DEFAULT_SHUTDOWN_TIMEOUT + SHUTDOWN_MARGIN + TEARDOWN_ALLOWANCE;
        assert!(
            stop <= STOP_GRACE,
            "shutdown_timeout {DEFAULT_SHUTDOWN_TIMEOUT:?} + margin {SHUTDOWN_MARGIN:?} + teardown {TEARDOWN_ALLOWANCE:?} = {stop:?}, past {STOP_GRACE:?}"
        );
        assert_eq!(STOP_GRACE, Duration::from_secs(10), "docker stop's default");
    }
}
