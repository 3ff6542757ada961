//! # solidq: durable background jobs for synchronous Rust programs
//!
//! Jobs live in SQL tables: SQLite (one file, several processes, nothing
//! to run), PostgreSQL for fleets, or MySQL 8 / MariaDB 10.6+. You
//! [`Queue::enqueue`] a [`Job`] (inside your own diesel transaction if you
//! like), worker threads in your binary claim and run it, and a supervisor
//! process restarts workers and releases the jobs of dead ones. Once
//! `enqueue` returns the job survives any crash, and it runs again only
//! when the process running it is gone. **New here? Read the
//! [guide]**, which starts from tasks; this page is a map.
//!
//! | to… | use |
//! | --- | --- |
//! | define a job | the [`Job`] trait: `KIND`, `perform`, and per-type [`JobOptions`] |
//! | retry, time out, prioritise, keep results | [`JobOptions`] (per type), [`EnqueueOptions`] (per enqueue), [`QueueConfig`] (defaults); [`Backoff`], [`Delivery`] |
//! | limit concurrency or rate | [`JobOptions::concurrency`] with a [`ConcurrencyLimit`] and [`Job::concurrency_key`]; [`JobOptions::rate_limit`] with a [`RateLimit`] and [`Job::rate_key`] |
//! | take turns between tenants | [`Job::fairness_key`], [`EnqueueOptions::fairness_key`] |
//! | enqueue | [`Queue::connect`], [`Queue::migrate`], [`Queue::enqueue`], [`Queue::enqueue_with`], [`Queue::enqueue_all`] |
//! | enqueue in your own transaction | [`Queue::open_connection`] → [`AnyConnection`] (a diesel `MultiConnection`), [`AnyConnection::write_transaction`], [`Queue::enqueue_on`]; other drivers: [`Queue::enqueue_statement`] |
//! | read what a job sees while it runs | [`JobContext`]: `attempt`, `deadline`, `is_cancelled`, `state`, `set_progress`, `step`, `batch_id` |
//! | run jobs | [`Worker`] (`register`, `threads`, `queues`, `state`, `wrap`, `run`, `start`, `drain`) |
//! | supervise worker processes | [`Supervisor`], `solidq supervisor` ([`config::SupervisorConfig`]) |
//! | cron schedules | [`RecurringTask`], [`Scheduler`] |
//! | steps, batches, workflows | [`JobContext::step`]; [`Queue::batch`], [`BatchOptions`]; [`JobRequest::after`] ([`workflow`]) |
//! | inspect and operate | [`Queue::job`], [`Queue::jobs`], [`Queue::queues`], [`Queue::retry_failed`], [`Queue::cancel_job`]; the `solidq` binary (the `solidq-cli` crate: `cargo install solidq-cli`) |
//! | dashboard, HTTP API, metrics | the `solidq-web` crate: `solidq web`, or `solidq_web::router` in your own server |
//! | hooks for metrics | [`events::Events`], [`Queue::with_events`] |
//! | test your jobs | [`testing::TestQueue`], [`Worker::drain`] |
//!
//! Cargo features: `sqlite` and `postgres` (default), `mysql`,
//! `bundled-libpq`, `logging` (`solidq::logging`: env_logger with each
//! line naming its process); see [the backends chapter](crate::guide::backends).
//! This crate is the library alone: no web server, no command-line parser,
//! no async runtime. The dashboard, HTTP API and metrics are the
//! `solidq-web` crate; the `solidq` command is the `solidq-cli` crate.
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
//!
//! ## Layers (for contributors)
//!
//! Modules stand on each other in one order, low to high; a module uses
//! only modules below it (`tests/it/layers.rs` checks every `crate::` path):
//!
//! | layer | modules | what |
//! | --- | --- | --- |
//! | 0 | `types` | plain data every layer shares: [`Error`], [`JobStatus`], [`Delivery`], [`Backoff`], [`ErrorInfo`], [`JobInfo`], [`QueuePattern`], stored limits, [`Schedule`], [`DatabaseUrl`], [`SqliteSynchronous`]; imports nothing of solidq |
//! | 1 | [`config`], [`concurrency`] | settings and their defaults; the limit builder |
//! | 2 | `job` | the [`Job`] trait, its options and context |
//! | 3 | `store` | the drivers (all SQL, one implementation per backend), rows, connections |
//! | 4 | `lifecycle` | the rules of a job's life that span tables: enqueue and placement, finish, batch and dependency ends, releases of stopped or dead processes, an operator's cancel |
//! | 5 | [`events`] | the hooks and their event types |
//! | 6 | `process` | registration, heartbeats, signals, in-process wake-ups |
//! | 7 | `client`, `logging` | [`Queue`]: enqueue and queries; log lines that name their process (`logging` feature) |
//! | 8 | [`workflow`] | dependencies between members of a batch: checked, then stored |
//! | 9 | [`batch`] | batches of jobs and their callbacks |
//! | 10 | `maintenance` | pruning dead processes, releasing orphans, cleaning, tending |
//! | 11 | `dispatcher` | scheduled → ready |
//! | 12 | `scheduler` | recurring tasks |
//! | 13 | `worker` | claiming and running jobs |
//! | 14 | `supervisor` | worker processes, and the loops above them |
//! | 15 | `admin` | operator queries and actions |
//! | 16 | `testing` | helpers for testing an app's jobs |
//!
//! Above the library, in crates of their own: `solidq-web` (the dashboard,
//! HTTP API and metrics, on [`Queue`] and the other public types) and
//! `solidq-cli` (the `solidq` binary, on both).
//!
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

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
mod lifecycle;
mod maintenance;
mod process;
mod scheduler;
mod store;
mod supervisor;
pub mod testing;
mod types;
mod worker;
pub mod workflow;

// The guide: Markdown chapters in src/guide/, compiled into the API
// documentation (and their examples into doctests) only. Declared here,
// not in a src/guide/mod.rs, so that it is no layer of the crate.
#[cfg(any(doc, doctest))]
#[doc = include_str!("guide/index.md")]
#[allow(rustdoc::redundant_explicit_links)]
pub mod guide {
    macro_rules! chapter {
        ($name:ident, $file:literal) => {
            #[doc = include_str!($file)]
            pub mod $name {}
        };
    }

    chapter!(jobs, "guide/jobs.md");
    chapter!(options, "guide/options.md");
    chapter!(limits, "guide/limits.md");
    chapter!(steps, "guide/steps.md");
    chapter!(batches_and_workflows, "guide/batches_and_workflows.md");
    chapter!(recurring, "guide/recurring.md");
    chapter!(workers_and_supervisor, "guide/workers_and_supervisor.md");
    chapter!(operating, "guide/operating.md");
    chapter!(deployment, "guide/deployment.md");
    chapter!(backends, "guide/backends.md");
    chapter!(performance, "guide/performance.md");
    chapter!(testing, "guide/testing.md");
}

/// The README's examples, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(feature = "logging")]
#[cfg_attr(docsrs, doc(cfg(feature = "logging")))]
pub mod logging;

pub use admin::{
    AuditEntry, AuditSource, Cancelled, ConcurrencyKey, DatabaseHealth, FailedFilter, Horizon,
    JobCount, JobFilter, JobPage, KnownNames, Name, NewAuditEntry, OpenTransaction, PostgresHealth,
    ProcessInfo, QueueStats, RecurringInfo, SqliteHealth, StatsBucket, TableHealth, Tick,
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
pub use store::{AnyConnection, ConnectionCustomizer, EnqueueStatement, SqlValue, Statement};
pub use supervisor::{CheckReport, Supervisor, SupervisorHandle};
pub use types::{
    Backend, Backoff, BoxError, DatabaseUrl, Delivery, Error, ErrorInfo, ErrorKind, JobInfo,
    JobStatus, QueuePattern, Result, Schedule, ScheduleError, SqliteSynchronous,
};
pub use worker::{Drained, Worker, WorkerHandle, WorkerStats};
pub use workflow::{Dependency, DependencyOutcome};

/// The migration versions embedded in this build for `backend`, oldest
/// first; every backend carries the same versions.
pub fn embedded_migrations(backend: Backend) -> Vec<String> {
    store::Store::embedded_migrations(backend)
}
