//! # solidq: durable background jobs for synchronous Rust programs
//!
//! Jobs live in SQL tables, SQLite by default (one file, several processes)
//! or PostgreSQL for fleets, modelled on Ruby's SolidQueue. Producers
//! [`Queue::enqueue`] jobs, possibly inside their own transaction; worker
//! threads in the user's binary claim and run them; a separate supervisor
//! process restarts workers and releases the jobs of dead ones.
//!
//! Beyond that: per-job options (retries with backoff, timeouts, delivery
//! modes, unique keys, retention), [`concurrency`] limits keyed by a job's
//! arguments, recurring tasks on cron schedules fired once per tick across
//! any number of [`Scheduler`]s, an operator CLI (`solidq`) with the same
//! operations on [`Queue`], [`events`] hooks for metrics, and log lines
//! that name the process that wrote them (`solidq::logging`, text or JSON).
//!
//! ## The promises
//! 1. Nothing is lost: once `enqueue` returns, the job survives any crash,
//!    power loss included with the default settings (on SQLite,
//!    [`SqliteSynchronous::Full`]; see [`QueueConfig::sqlite_synchronous`]).
//! 2. At least once, and no more than needed: a job runs again only when
//!    the process running it is gone, never because it is slow.
//! 3. A stalled job is counted, logged and bounded.
//! 4. Deploys are graceful: SIGTERM lets running jobs finish, hands back
//!    the rest, and deregisters.
//! 5. Bad input gets a clear [`Error`] and changes nothing.
//!
//! ## Lifecycle
//!
//! A job is always in exactly one execution table, or finished; every move
//! between tables is one transaction.
//!
//! ```text
//! enqueue ──► scheduled ──(due: dispatcher)──► ready ──(claim: worker)──► claimed ──► finished (kept for keep_result)
//!    │                                           ▲                          │
//!    └── (no delay) ─────────────────────────────┘                          ├─ error, attempts left ──► scheduled (retry_at)
//!                                                 ▲                          ├─ error, none left ──────► failed
//!                                                 └── graceful shutdown ─────┘ (released, not a stall)
//! ```
//!
//! Every finalize deletes the claim row matching both the job and the
//! claiming process; if none matched, the claim was lost (the process was
//! pruned meanwhile) and nothing is written over the new claim.
//!
//! ## Layers
//!
//! Modules stand on each other in one order, low to high; a module uses
//! only modules below it (`tests/layers.rs` checks every `crate::` path):
//!
//! | layer | modules | what |
//! | --- | --- | --- |
//! | 0 | `types` | plain data every layer shares: [`Error`], [`JobStatus`], [`Delivery`], [`Backoff`], [`ErrorInfo`], [`JobInfo`], [`QueuePattern`], stored limits, [`Schedule`], [`DatabaseUrl`], [`SqliteSynchronous`]; imports nothing of solidq |
//! | 1 | [`config`], [`concurrency`] | settings and their defaults; the limit builder |
//! | 2 | `job` | the [`Job`] trait, its options and context |
//! | 3 | `store` | all SQL, one implementation per backend |
//! | 4 | [`events`] | the hooks and their event types |
//! | 5 | `process` | registration, heartbeats, signals, in-process wake-ups |
//! | 6 | `client`, `logging` | [`Queue`]: enqueue and queries; log lines that name their process (`cli` feature) |
//! | 7 | [`workflow`] | dependencies between members of a batch: checked, then stored |
//! | 8 | [`batch`] | batches of jobs and their callbacks |
//! | 9 | `maintenance` | pruning dead processes, releasing orphans, cleaning, tending |
//! | 10 | `dispatcher` | scheduled → ready |
//! | 11 | `scheduler` | recurring tasks |
//! | 12 | `worker` | claiming and running jobs |
//! | 13 | `supervisor` | worker processes, and the loops above them |
//! | 14 | `admin` | operator queries and actions |
//! | 15 | `testing` | helpers for testing an app's jobs |
//! | 16 | `web` | the dashboard, HTTP API and metrics (`web` feature) |
//! | 17 | `cli` | the `solidq` binary |
//!
//! ## Example
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use solidq::{EnqueueOptions, Job, JobContext, JobResult, Queue, Worker};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendEmail { user_id: i64 }
//!
//! impl Job for SendEmail {
//!     const KIND: &'static str = "send_email";
//!     fn perform(&self, _ctx: &JobContext) -> JobResult {
//!         Ok(serde_json::json!({ "sent_to": self.user_id }))
//!     }
//! }
//!
//! fn main() -> Result<(), solidq::Error> {
//!     let queue = Queue::connect("sqlite://jobs.sqlite3")?;
//!     queue.migrate()?;
//!     let id = queue.enqueue(&SendEmail { user_id: 7 })?;
//!     queue.enqueue_with(
//!         &SendEmail { user_id: 8 },
//!         EnqueueOptions::new().queue("mail").priority(-5).delay(Duration::from_secs(30)),
//!     )?;
//!     println!("enqueued job {id}");
//!     Worker::new(queue).queues(["mail", "*"]).threads(8).register::<SendEmail>().run()
//! }
//! ```
#![warn(missing_docs)]

#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
compile_error!(
    "solidq needs at least one backend: enable the `sqlite`, `postgres` (both default) or `mysql` feature"
);

mod admin;
pub mod batch;
mod client;
pub mod concurrency;
pub mod config;
mod dispatcher;
pub mod events;
mod job;
mod maintenance;
mod process;
mod scheduler;
mod store;
mod supervisor;
pub mod testing;
mod types;
mod worker;
pub mod workflow;

#[cfg(any(doc, doctest))]
pub mod guide;

/// The README's examples, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod logging;
#[cfg(feature = "web")]
pub mod web;

pub use admin::{
    AuditEntry, AuditSource, CONCURRENCY_HOLDERS_SHOWN, Cancelled, ConcurrencyKey,
    DEFAULT_JOB_LIST_LIMIT, DatabaseHealth, FailedFilter, JOB_OUTCOMES, JobCount, JobFilter,
    JobPage, KnownNames, MAX_AUDIT_ACTION_LEN, MAX_AUDIT_ACTOR_LEN, MAX_AUDIT_TARGET_LEN,
    MISSED_TICK_GRACE, Name, NewAuditEntry, PostgresHealth, ProcessInfo, QueueStats, RecurringInfo,
    SqliteHealth, StatsBucket, TableHealth, Tick,
};
pub use batch::{BatchEnqueued, BatchInfo, BatchOptions};
pub use client::{DriverRef, EnqueueConnection, Enqueued, JobRequest, Queue};
pub use concurrency::{ConcurrencyLimit, OnConflict, RateLimit};
pub use config::{DispatcherConfig, QueueConfig, WorkerConfig};
pub use dispatcher::{Dispatcher, DispatcherHandle};
pub use events::{Events, LogEvents, NoEvents};
pub use job::{
    EnqueueOptions, Job, JobContext, JobError, JobOptions, JobResult, Middleware, Next, Step,
};
pub use process::{ProcessIdentity, install_signal_handlers, process_identity, signal_received};
pub use scheduler::{RecurringTask, Scheduler, SchedulerHandle};
pub use store::{
    AnyConnection, ConnectionCustomizer, EnqueueStatement, SqlValue, Statement,
    lock_conflicts_retried, statements_executed,
};
pub use supervisor::{
    CheckReport, RESTART_BACKOFF_BASE, RESTART_BACKOFF_MAX, SHUTDOWN_MARGIN, STOP_GRACE,
    Supervisor, SupervisorHandle, YOUNG_DEATH,
};
pub use types::{
    Backend, Backoff, DatabaseUrl, Delivery, Error, ErrorInfo, ErrorKind, JobInfo, JobStatus,
    LIBPQ_DEFAULTS, QueuePattern, Result, Schedule, ScheduleError, SqliteSynchronous,
};
pub use worker::{Drained, Worker, WorkerHandle, WorkerStats};
pub use workflow::{Dependency, DependencyOutcome};

/// The migration versions embedded in this build for `backend`, oldest
/// first; every backend carries the same versions.
pub fn embedded_migrations(backend: Backend) -> Vec<String> {
    store::Store::embedded_migrations(backend)
}
