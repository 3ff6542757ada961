//! Every setting, its default as an exported constant, and validation.
//!
//! [`QueueConfig`] holds the defaults applied when a job is enqueued (and the
//! connection pool); [`WorkerConfig`] and [`DispatcherConfig`] configure the
//! long-running loops. `validate()` reports errors (the value cannot work)
//! and warnings (it works, probably not as intended) separately.

mod supervisor;
mod web;

use std::time::Duration;

pub use supervisor::*;
pub use web::*;

pub use crate::types::LIBPQ_DEFAULTS;
pub use crate::types::MAX_QUEUE_NAME_LEN;
use crate::types::{Backoff, Delivery, Error, Result, SqliteSynchronous, validate_queue_name};

/// How long an SQLite connection waits for the write lock before reporting
/// `database is locked` (which solidq retries up to this long too).
pub const DEFAULT_SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How far an SQLite commit is pushed to disk before it returns: `full`,
/// so a job is on disk once `enqueue` returns, power loss included (see
/// [`SqliteSynchronous`] for what each value keeps, and the README's
/// SQLite section for what it costs).
pub const DEFAULT_SQLITE_SYNCHRONOUS: SqliteSynchronous = SqliteSynchronous::Full;

/// The queue a job goes to when neither its type nor the enqueue names one.
pub const DEFAULT_QUEUE: &str = "default";
/// Attempts a job gets (the first run included): one retry after a failure,
/// as LeanCloud's Cloud Queue does.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 2;
/// The wait before a retry: 1 minute, doubling, capped at 1 hour, ±10 %.
pub const DEFAULT_BACKOFF: Backoff = Backoff::Exponential {
    base_ms: 60_000,
    factor: 2.0,
    max_ms: 3_600_000,
    jitter: 0.1,
};
/// How many times a job may hand itself back without spending an attempt
/// ([`JobError::snooze`](crate::JobError::snooze),
/// [`JobError::interrupted`](crate::JobError::interrupted)) before the next
/// snooze fails it instead: a job cannot snooze forever unnoticed. Set per
/// type or enqueue with `max_snoozes`.
pub const DEFAULT_MAX_SNOOZES: u32 = 100;

/// How long finished jobs and their results are kept: 1 day, as SolidQueue
/// and River keep them.
pub const DEFAULT_KEEP_RESULT: Duration = Duration::from_secs(24 * 3600);
/// Worker threads per worker process.
pub const DEFAULT_THREADS: usize = 5;
/// How often an idle worker polls when no wake-up arrives.
pub const DEFAULT_POLLING_INTERVAL: Duration = Duration::from_secs(1);
/// How often an idle worker polls anyway while a listener tells it about
/// new jobs (PostgreSQL notifications, SQLite's change counter).
pub const DEFAULT_FALLBACK_POLLING_INTERVAL: Duration = Duration::from_secs(5);
/// How often a worker on SQLite reads the database's change counter when
/// nothing told it of a write. On Linux every write to the database file or
/// its WAL tells it (inotify), so the counter is read within a millisecond
/// of a commit and this is a safety net: 100 ms. Elsewhere it is what the
/// pickup of a job enqueued by another process waits: 10 ms.
#[cfg(target_os = "linux")]
pub const DEFAULT_SQLITE_WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// How often a worker on SQLite reads the database's change counter: the
/// pickup of a job enqueued by another process waits half of it on
/// average (on Linux, inotify tells the worker of every write and this is
/// 100 ms, a safety net).
#[cfg(not(target_os = "linux"))]
pub const DEFAULT_SQLITE_WATCH_INTERVAL: Duration = Duration::from_millis(10);
/// How often a worker on MySQL reads the signature of new and newly ready
/// jobs (MySQL has no notifications): a job enqueued by another process
/// waits half of it on average before the claim.
pub const DEFAULT_MYSQL_WATCH_INTERVAL: Duration = Duration::from_millis(10);
/// The most jobs a worker claims beyond its free threads. It claims ahead
/// only as many as its threads are expected to finish while its next claim
/// is in flight (threads × claim time ÷ job time), so fast jobs come in large
/// batches and slow ones are not hoarded.
pub const DEFAULT_PREFETCH: usize = 128;
/// How often a process writes its heartbeat.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// A process whose last heartbeat is older than this is considered dead.
pub const DEFAULT_PROCESS_ALIVE_THRESHOLD: Duration = Duration::from_secs(60);
/// How long a stopping worker lets running jobs finish: 7 s, so that a
/// supervisor's whole stop (this, plus `SHUTDOWN_MARGIN` for its workers
/// to record their last outcomes and deregister, plus its own teardown)
/// fits in the 10 s that `docker stop` gives before SIGKILL.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(7);
/// How many jobs a dispatcher moves from scheduled to ready per transaction.
pub const DEFAULT_DISPATCHER_BATCH_SIZE: usize = 500;
/// How often an idle dispatcher looks for due jobs.
pub const DEFAULT_DISPATCHER_POLLING_INTERVAL: Duration = Duration::from_secs(1);
/// How many overdue ticks of one recurring task a scheduler fires in a row
/// before it gives up catching up (after a long pause of the host or the
/// database), skips to the present and logs a warning.
pub const RECURRING_MAX_CATCH_UP: u32 = 100;
/// The latest past its time a tick of a recurring task is fired: 1 day.
/// A scheduler that finds an older tick due (its host slept, the database
/// was unreachable for that long) skips to the present and reports the
/// skipped ticks, and no tick that old is ever inserted, by any path.
/// Well below [`RECURRING_GUARD_RETENTION`], so the guard of any tick that
/// can still fire exists.
pub const RECURRING_MAX_LATENESS: Duration = Duration::from_secs(24 * 3600);
/// How long the guard of a recurring task's tick (its `(task, run_at)` row
/// in `solidq_recurring_executions`, which makes each tick fire once) is
/// kept after the tick: 3 days, whatever became of the tick's job (it may
/// be deleted at once with `keep_result` 0). The cleaner deletes older
/// guards in batches, but never a task's latest (the last run `solidq
/// recurring` shows). Longer than [`RECURRING_MAX_LATENESS`] by two days,
/// so a tick is never fired again once its guard is gone.
pub const RECURRING_GUARD_RETENTION: Duration = Duration::from_secs(3 * 24 * 3600);
/// How long the per-minute rows of the job statistics are kept: 1 day.
/// The cleaner folds older rows into one totals row per queue, kind and
/// outcome (in the transaction that deletes them), so totals never
/// decrease while the per-minute detail ends after a day.
pub const JOB_STATS_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// How often a dispatcher deletes expired concurrency semaphores and offers
/// slots to blocked jobs that waited past their limit's duration. A slot
/// is given back when its holder ends; this sweep only catches slots whose
/// holder vanished, so it can be slow.
pub const DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL: Duration = Duration::from_secs(30);
/// Completions written per transaction by a worker, at most.
pub const DEFAULT_COMPLETION_BATCH_SIZE: usize = 256;
/// How long a worker waits to group completions before writing them.
pub const DEFAULT_COMPLETION_FLUSH_INTERVAL: Duration = Duration::from_millis(2);
/// Most connections in a queue's pool: enough for a worker of
/// [`DEFAULT_THREADS`] threads.
pub const DEFAULT_POOL_SIZE: u32 = 10;
/// The longest a job's kind may be, in bytes.
pub const MAX_KIND_LEN: usize = 255;
/// The largest JSON text of a job's arguments, and of its result, in
/// bytes: 1 MiB. A job is a pointer to work, not the work's data (Sidekiq
/// and Oban advise small arguments, LeanCloud caps them): arguments over
/// it are refused at enqueue and a result over it fails its job, each
/// with [`Error::TooLarge`] naming the size and
/// the limit, so no row can make a page, a listing or a claim slow. On
/// MySQL the server's `max_allowed_packet` (less 64 KiB for the rest of
/// the statement) caps it too.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// The longest a `unique_key` may be, in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 255;

/// Client-side settings: the defaults applied at enqueue, and the pool.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue for jobs that name none. Defaults to [`DEFAULT_QUEUE`].
    pub default_queue: String,
    /// Attempts per job. Defaults to [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: u32,
    /// Retry delays. Defaults to [`DEFAULT_BACKOFF`].
    pub backoff: Backoff,
    /// Per-attempt deadline. Defaults to none.
    pub timeout: Option<Duration>,
    /// Delivery mode. Defaults to [`Delivery::AtLeastOnce`].
    pub delivery: Delivery,
    /// How long finished jobs are kept. Defaults to [`DEFAULT_KEEP_RESULT`].
    pub keep_result: Duration,
    /// Most connections in the pool (opened on demand, so an idle client
    /// holds one). A worker uses the queue's pool for its own loops (4) and
    /// the jobs that enqueue (up to one per thread), and warns when this is
    /// smaller than `threads + 4`. Defaults to [`DEFAULT_POOL_SIZE`].
    pub pool_size: u32,
    /// How long to wait for a pooled connection. Defaults to 30 s.
    pub pool_timeout: Duration,
    /// SQLite only: how long to wait for the write lock. Defaults to
    /// [`DEFAULT_SQLITE_BUSY_TIMEOUT`].
    pub sqlite_busy_timeout: Duration,
    /// SQLite only: the `synchronous` pragma of every connection this queue
    /// opens (its pool, and [`Queue::open_connection`](crate::Queue::open_connection)):
    /// whether a commit survives a power loss once it returns
    /// ([`SqliteSynchronous::Full`]) or only a crash of the process
    /// ([`SqliteSynchronous::Normal`]). Read from `SOLIDQ_SQLITE_SYNCHRONOUS`
    /// by [`QueueConfig::from_env`]. Defaults to
    /// [`DEFAULT_SQLITE_SYNCHRONOUS`].
    pub sqlite_synchronous: SqliteSynchronous,
    /// The largest JSON text of a job's arguments (refused at enqueue) and
    /// of its result (its job fails with `result_too_large`), in bytes.
    /// Read from `SOLIDQ_MAX_PAYLOAD_BYTES` by [`QueueConfig::from_env`]
    /// (a supervisor hands its `max_payload_bytes` to its workers so).
    /// Defaults to [`DEFAULT_MAX_PAYLOAD_BYTES`].
    pub max_payload_bytes: usize,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            default_queue: DEFAULT_QUEUE.to_string(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: DEFAULT_BACKOFF,
            timeout: None,
            delivery: Delivery::AtLeastOnce,
            keep_result: DEFAULT_KEEP_RESULT,
            pool_size: DEFAULT_POOL_SIZE,
            pool_timeout: Duration::from_secs(30),
            sqlite_busy_timeout: DEFAULT_SQLITE_BUSY_TIMEOUT,
            sqlite_synchronous: DEFAULT_SQLITE_SYNCHRONOUS,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}

impl QueueConfig {
    /// Checks every setting; the first error found is returned.
    pub fn validate(&self) -> Result<()> {
        validate_queue_name(&self.default_queue)?;
        positive("max_attempts", self.max_attempts as u64)?;
        positive("pool_size", self.pool_size as u64)?;
        positive("max_payload_bytes", self.max_payload_bytes as u64)?;
        Ok(())
    }
}

/// Settings of a worker process.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Queues to claim from, in order: exact names, `prefix*`, or `*`.
    /// Defaults to `["*"]`.
    pub queues: Vec<String>,
    /// Threads running jobs. Defaults to [`DEFAULT_THREADS`].
    pub threads: usize,
    /// Idle poll interval while no listener works. Defaults to
    /// [`DEFAULT_POLLING_INTERVAL`].
    pub polling_interval: Duration,
    /// Idle poll interval while a listener (PostgreSQL LISTEN, SQLite's
    /// change counter) wakes the worker for new jobs: a safety net only.
    /// Defaults to [`DEFAULT_FALLBACK_POLLING_INTERVAL`].
    pub fallback_polling_interval: Duration,
    /// SQLite only: how often the change counter is read when no write was
    /// seen (on Linux every write to the file or its WAL is seen at once).
    /// Defaults to [`DEFAULT_SQLITE_WATCH_INTERVAL`].
    pub sqlite_watch_interval: Duration,
    /// MySQL only: how often the signature of new and newly ready jobs is
    /// read (three index probes). Defaults to
    /// [`DEFAULT_MYSQL_WATCH_INTERVAL`].
    pub mysql_watch_interval: Duration,
    /// PostgreSQL: whether every worker claims on every new-job
    /// notification it hears. By default (false) the workers serving the
    /// same queue list take turns: the one holding a session advisory lock
    /// acts, and hands the lock to the next in line once its threads are
    /// full, so a job costs one claim however many workers idle (each also
    /// holds one more connection, the lock's). See the guide's
    /// performance chapter, "One wake-up per job".
    pub wake_all: bool,
    /// The most jobs claimed beyond the free threads, waiting in memory for
    /// a thread (claimed like any other: released at shutdown, released by
    /// the stall rules if the process dies). The worker claims ahead only as
    /// many as its threads finish during one claim round trip, by moving
    /// averages of both: for one-second jobs that is about none. 0 turns it
    /// off. Defaults to [`DEFAULT_PREFETCH`].
    pub prefetch: usize,
    /// Heartbeat interval. Defaults to [`DEFAULT_HEARTBEAT_INTERVAL`].
    pub heartbeat_interval: Duration,
    /// A process whose heartbeat is older than this is dead (standalone:
    /// its maintenance prunes it). When its own heartbeats have failed for
    /// this long less one interval, the worker starts nothing and asks its
    /// running jobs to stop ([`JobContext::is_cancelled`](crate::JobContext::is_cancelled))
    /// until the database answers; it never exits for it. Defaults to
    /// [`DEFAULT_PROCESS_ALIVE_THRESHOLD`].
    pub process_alive_threshold: Duration,
    /// Grace period for running jobs at shutdown. Defaults to
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`].
    pub shutdown_timeout: Duration,
    /// Standalone: releases after a dead process before a job fails, when
    /// its type does not say. Defaults to [`DEFAULT_MAX_STALLED_COUNT`].
    pub max_stalled_count: u32,
    /// Completions written per transaction, at most. Defaults to
    /// [`DEFAULT_COMPLETION_BATCH_SIZE`].
    pub completion_batch_size: usize,
    /// Longest wait to group completions. Defaults to
    /// [`DEFAULT_COMPLETION_FLUSH_INTERVAL`].
    pub completion_flush_interval: Duration,
    /// The supervisor that spawned this worker, if any. Defaults to none.
    pub supervisor_id: Option<i64>,
    /// A name for the process row. Defaults to `worker-<random>`.
    pub name: Option<String>,
    /// How long past its deadline (its `timeout`) a job may keep running
    /// before the worker process exits with [`EXIT_HARD_TIMEOUT`], so its
    /// supervisor releases or fails the job by the stall rules. Defaults to
    /// none: such a job keeps its thread, and the worker warns about it at
    /// every heartbeat.
    pub hard_timeout: Option<Duration>,
    /// Whether the worker runs without a supervisor, so needs nothing
    /// else: it then also moves due scheduled jobs (delays, retries) to
    /// ready, and runs maintenance every heartbeat interval (prunes dead
    /// processes and releases their jobs, cleans finished jobs, tends the
    /// tables), as a supervisor would. Defaults to true; workers spawned by
    /// a supervisor turn it off.
    pub standalone: bool,
    /// On a database that lacks migrations of this build: `start` (and
    /// `run`) wait for them, saying so every 30 s, and start once they are
    /// applied, instead of refusing with [`Error::SchemaBehind`].
    /// For platforms that roll out the binary before the migration runs.
    /// Defaults to false (deploy order: migrate first).
    pub wait_for_migrations: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            queues: vec!["*".to_string()],
            threads: DEFAULT_THREADS,
            polling_interval: DEFAULT_POLLING_INTERVAL,
            fallback_polling_interval: DEFAULT_FALLBACK_POLLING_INTERVAL,
            sqlite_watch_interval: DEFAULT_SQLITE_WATCH_INTERVAL,
            mysql_watch_interval: DEFAULT_MYSQL_WATCH_INTERVAL,
            wake_all: false,
            prefetch: DEFAULT_PREFETCH,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            process_alive_threshold: DEFAULT_PROCESS_ALIVE_THRESHOLD,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            max_stalled_count: DEFAULT_MAX_STALLED_COUNT,
            completion_batch_size: DEFAULT_COMPLETION_BATCH_SIZE,
            completion_flush_interval: DEFAULT_COMPLETION_FLUSH_INTERVAL,
            supervisor_id: None,
            name: None,
            hard_timeout: None,
            standalone: true,
            wait_for_migrations: false,
        }
    }
}

/// The exit status of a worker process that stopped because a job ran past
/// its deadline by more than `hard_timeout`.
pub const EXIT_HARD_TIMEOUT: i32 = 3;

/// The result of validating a configuration that has no errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warnings(pub Vec<String>);

impl WorkerConfig {
    /// Checks every setting: an error for values that cannot work, warnings
    /// for values that work badly (a heartbeat slower than the threshold).
    pub fn validate(&self) -> Result<Warnings> {
        if self.queues.is_empty() {
            return Err(Error::InvalidOption {
                option: "queues",
                value: "[]".into(),
                reason: "a worker needs at least one queue (use \"*\" for all)".into(),
            });
        }
        for queue in &self.queues {
            crate::types::QueuePattern::parse(queue)?;
        }
        positive("threads", self.threads as u64)?;
        positive("completion_batch_size", self.completion_batch_size as u64)?;
        nonzero_duration("polling_interval", self.polling_interval)?;
        nonzero_duration("heartbeat_interval", self.heartbeat_interval)?;
        nonzero_duration("process_alive_threshold", self.process_alive_threshold)?;
        let mut warnings = Vec::new();
        if self.heartbeat_interval * 2 > self.process_alive_threshold {
            warnings.push(format!(
                "heartbeat_interval {:?} is more than half of process_alive_threshold {:?}: one late heartbeat can get a live worker pruned",
                self.heartbeat_interval, self.process_alive_threshold
            ));
        }
        Ok(Warnings(warnings))
    }
}

/// Settings of a dispatcher (scheduled → ready).
#[derive(Debug, Clone, PartialEq)]
pub struct DispatcherConfig {
    /// Idle poll interval. Defaults to [`DEFAULT_DISPATCHER_POLLING_INTERVAL`].
    pub polling_interval: Duration,
    /// Jobs moved per transaction. Defaults to
    /// [`DEFAULT_DISPATCHER_BATCH_SIZE`].
    pub batch_size: usize,
    /// Heartbeat interval. Defaults to [`DEFAULT_HEARTBEAT_INTERVAL`].
    pub heartbeat_interval: Duration,
    /// How often it deletes expired concurrency semaphores and offers their
    /// slots to blocked jobs. Defaults to
    /// [`DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL`].
    pub concurrency_maintenance_interval: Duration,
    /// Standalone: a process whose heartbeat is older than this is dead
    /// (pruned by its maintenance); its own heartbeats failing this long
    /// never stop it. Defaults to [`DEFAULT_PROCESS_ALIVE_THRESHOLD`].
    pub process_alive_threshold: Duration,
    /// Standalone: releases after a dead process before a job fails, when
    /// its type does not say. Defaults to [`DEFAULT_MAX_STALLED_COUNT`].
    pub max_stalled_count: u32,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            polling_interval: DEFAULT_DISPATCHER_POLLING_INTERVAL,
            batch_size: DEFAULT_DISPATCHER_BATCH_SIZE,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            concurrency_maintenance_interval: DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL,
            process_alive_threshold: DEFAULT_PROCESS_ALIVE_THRESHOLD,
            max_stalled_count: DEFAULT_MAX_STALLED_COUNT,
        }
    }
}

impl DispatcherConfig {
    /// Checks every setting.
    pub fn validate(&self) -> Result<()> {
        positive("batch_size", self.batch_size as u64)?;
        nonzero_duration("polling_interval", self.polling_interval)?;
        nonzero_duration("heartbeat_interval", self.heartbeat_interval)?;
        nonzero_duration("process_alive_threshold", self.process_alive_threshold)?;
        nonzero_duration(
            "concurrency_maintenance_interval",
            self.concurrency_maintenance_interval,
        )
    }
}

fn positive(option: &'static str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(Error::InvalidOption {
            option,
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

fn nonzero_duration(option: &'static str, value: Duration) -> Result<()> {
    if value.is_zero() {
        return Err(Error::InvalidOption {
            option,
            value: "0s".into(),
            reason: "must be longer than zero".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_config_reports_errors_and_warnings_apart() {
        let mut config = WorkerConfig::default();
        assert_eq!(config.validate().unwrap(), Warnings::default());
        config.heartbeat_interval = Duration::from_secs(50);
        assert_eq!(config.validate().unwrap().0.len(), 1);
        config.threads = 0;
        assert!(config.validate().is_err());
    }
}
