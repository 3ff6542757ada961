//! Event hooks: implement [`Events`] to feed your own metrics or alerts.
//! Every method has a no-op default, so an implementation overrides only
//! what it needs. solidq logs these events through `log` whether or not a
//! hook is installed.

use chrono::{DateTime, Utc};

/// Receives solidq's events. Called on solidq's own threads: keep it quick
/// and never block.
pub trait Events: Send + Sync + 'static {
    /// A claimed job's process died and the job was released to ready, or
    /// failed because it stalled too often (or is at-most-once).
    fn job_stalled(&self, _event: &JobStalled) {}

    /// A dead process's row was deleted and its claims handled.
    fn process_pruned(&self, _event: &ProcessPruned) {}
}

/// The hooks used when none are installed: they do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl Events for NoEvents {}

/// A job whose process died while holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobStalled {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The process that held it.
    pub process_id: i64,
    /// How many times it has stalled now.
    pub stalled_count: u32,
    /// `Some(error)` when it was failed instead of released.
    pub failed: Option<String>,
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
