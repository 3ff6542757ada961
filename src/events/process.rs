//! The events of processes and of recurring tasks.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A process row was registered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessRegistered {
    /// The row's id.
    pub process_id: i64,
    /// worker, dispatcher, scheduler or supervisor.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its OS pid.
    pub pid: i32,
    /// Its host.
    pub hostname: String,
    /// The supervisor that spawned it, if one did.
    pub supervisor_id: Option<i64>,
}

/// Why a process row was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PruneReason {
    /// Its supervisor saw the process exit without deregistering.
    Exited,
    /// Its supervisor killed it after the shutdown grace period.
    KilledAtShutdown,
    /// Its last heartbeat is older than the alive threshold.
    HeartbeatExpired,
}

/// A process row that was pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessPruned {
    /// The row's id.
    pub process_id: i64,
    /// worker, dispatcher, supervisor…
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its OS pid.
    pub pid: i32,
    /// Its host.
    pub hostname: String,
    /// Its last heartbeat (database clock).
    pub last_heartbeat_at: DateTime<Utc>,
    /// Why it was pruned.
    pub reason: PruneReason,
    /// Jobs released back to ready.
    pub released: usize,
    /// Jobs failed (stalled too often, or at-most-once).
    pub failed: usize,
}

/// A recurring task's job was enqueued for a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecurringFired {
    /// The task's key.
    pub task_key: String,
    /// The tick (database clock).
    pub run_at: DateTime<Utc>,
    /// The job enqueued for it.
    pub job_id: i64,
    /// The job's kind.
    pub kind: String,
    /// The job's queue.
    pub queue: String,
    /// How late the scheduler fired it, past the tick.
    pub late_by: Duration,
}

/// Why a scheduler did not enqueue ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Another scheduler fired this tick first (each tick fires once
    /// across every scheduler). Expected whenever several schedulers run.
    FiredElsewhere,
    /// The scheduler fell more than
    /// [`RECURRING_MAX_CATCH_UP`](crate::config::RECURRING_MAX_CATCH_UP)
    /// ticks behind (a paused host, a slow database) and skipped to the
    /// present.
    TooFarBehind,
    /// The ticks were more than
    /// [`RECURRING_MAX_LATENESS`](crate::config::RECURRING_MAX_LATENESS)
    /// in the past by the database's clock (the scheduler's host slept, the
    /// database was unreachable): too late to fire, since their guards may
    /// have been aged out. The scheduler goes on from the first tick that
    /// is not.
    TooLate,
}

/// Ticks of a recurring task that a scheduler did not enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecurringSkipped {
    /// The task's key.
    pub task_key: String,
    /// Why.
    pub reason: SkipReason,
    /// The first tick skipped.
    pub run_at: DateTime<Utc>,
    /// The last tick skipped (`run_at` when one was).
    pub through: DateTime<Utc>,
    /// How many ticks were skipped (1 for
    /// [`SkipReason::FiredElsewhere`]).
    pub ticks: u64,
}
