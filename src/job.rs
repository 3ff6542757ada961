//! What a job is: the [`Job`] trait, its options, the [`JobContext`] it runs
//! with, the [`JobError`] it may return, and the [`JobInfo`] a query reports.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::concurrency::{ConcurrencyLimit, StoredLimit};

/// A unit of background work.
///
/// The struct's fields are the job's arguments, stored as JSON; `KIND` is the
/// name the row carries so a worker knows which type to rebuild. Renaming a
/// type is safe; changing `KIND` orphans the jobs already enqueued.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use solidq::{Job, JobContext, JobOptions, JobResult};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail { user_id: i64 }
///
/// impl Job for SendEmail {
///     const KIND: &'static str = "send_email";
///
///     fn perform(&self, ctx: &JobContext) -> JobResult {
///         // ... deliver the mail; `?` turns any std error into a JobError ...
///         Ok(serde_json::json!({ "user": self.user_id, "attempt": ctx.attempt() }))
///     }
///
///     fn options() -> JobOptions {
///         JobOptions::new().queue("mail").max_attempts(5)
///     }
/// }
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + 'static {
    /// The name stored with every job of this type. Unique per worker.
    const KIND: &'static str;

    /// Runs the job. `Ok(value)` stores `value` as the job's result (use
    /// `serde_json::Value::Null` for none); `Err` records a failed attempt,
    /// retried per the job's `max_attempts` and backoff. A panic is caught and
    /// recorded like an error.
    fn perform(&self, ctx: &JobContext) -> JobResult;

    /// Defaults for every job of this type; a single enqueue can override
    /// them with [`EnqueueOptions`]. Unset fields fall back to the queue's
    /// [`crate::QueueConfig`].
    fn options() -> JobOptions {
        JobOptions::default()
    }

    /// How long to wait before retrying after failed attempt `attempt`
    /// (1-based) ended with `error`. The default follows `policy`, the job's
    /// [`Backoff`] (from its options); override it for a backoff of your own,
    /// for example a longer wait when `error.kind` says "rate limited".
    fn retry_delay(attempt: u32, error: &ErrorInfo, policy: &Backoff) -> Duration {
        let _ = error;
        policy.delay(attempt, fastrand::f64())
    }

    /// Which jobs share a concurrency limit, when the type sets one
    /// ([`JobOptions::concurrency`]): jobs whose keys are equal count
    /// against the same limit. The default, `None`, puts every job of the
    /// type under one limit. Computed once, at enqueue.
    fn concurrency_key(&self) -> Option<String> {
        None
    }
}

/// What [`Job::perform`] returns: a JSON result or a [`JobError`].
pub type JobResult = Result<serde_json::Value, JobError>;

/// How a job is delivered when its outcome is uncertain (its process died,
/// or shutdown ran out of time while it was running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Run it again: it may run more than once. The default.
    #[default]
    AtLeastOnce,
    /// Never start it a second time after an uncertain outcome: fail it
    /// instead. It may then not have run to completion at all.
    AtMostOnce,
}

impl Delivery {
    /// The value stored in the `delivery` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::AtLeastOnce => "at_least_once",
            Delivery::AtMostOnce => "at_most_once",
        }
    }

    pub(crate) fn from_column(value: &str) -> Delivery {
        match value {
            "at_most_once" => Delivery::AtMostOnce,
            _ => Delivery::AtLeastOnce,
        }
    }
}

impl fmt::Display for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long to wait before retrying a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Backoff {
    /// The same delay after every failure.
    Fixed {
        /// The delay, in milliseconds.
        delay_ms: u64,
        /// Random spread as a fraction of the delay (0.1 = ±10 %).
        #[serde(default)]
        jitter: f64,
    },
    /// `base × factor^(attempt−1)`, capped at `max`.
    Exponential {
        /// The first retry's delay, in milliseconds.
        base_ms: u64,
        /// The growth factor per attempt (2.0 doubles).
        factor: f64,
        /// The longest delay, in milliseconds.
        max_ms: u64,
        /// Random spread as a fraction of the delay (0.1 = ±10 %).
        #[serde(default)]
        jitter: f64,
    },
}

impl Backoff {
    /// A fixed delay without jitter.
    pub fn fixed(delay: Duration) -> Backoff {
        Backoff::Fixed {
            delay_ms: millis(delay),
            jitter: 0.0,
        }
    }

    /// Exponential growth from `base`, doubling, capped at `max`, no jitter.
    pub fn exponential(base: Duration, max: Duration) -> Backoff {
        Backoff::Exponential {
            base_ms: millis(base),
            factor: 2.0,
            max_ms: millis(max),
            jitter: 0.0,
        }
    }

    /// The same policy with `fraction` of random spread (0.0–1.0).
    pub fn with_jitter(self, fraction: f64) -> Backoff {
        let fraction = fraction.clamp(0.0, 1.0);
        match self {
            Backoff::Fixed { delay_ms, .. } => Backoff::Fixed {
                delay_ms,
                jitter: fraction,
            },
            Backoff::Exponential {
                base_ms,
                factor,
                max_ms,
                ..
            } => Backoff::Exponential {
                base_ms,
                factor,
                max_ms,
                jitter: fraction,
            },
        }
    }

    /// The delay after the failure of attempt `attempt` (1-based), with its
    /// jitter drawn from `random` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, random: f64) -> Duration {
        let (nominal, jitter) = match *self {
            Backoff::Fixed { delay_ms, jitter } => (delay_ms as f64, jitter),
            Backoff::Exponential {
                base_ms,
                factor,
                max_ms,
                jitter,
            } => {
                let exponent = attempt.saturating_sub(1).min(64) as i32;
                let grown = base_ms as f64 * factor.max(1.0).powi(exponent);
                (grown.min(max_ms as f64), jitter)
            }
        };
        let spread = nominal * jitter * (2.0 * random - 1.0);
        Duration::from_secs_f64(((nominal + spread).max(0.0)) / 1000.0)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Per-type defaults for a job's options; every field is optional and falls
/// back to the queue's configuration. Built with chained setters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobOptions {
    pub(crate) queue: Option<String>,
    pub(crate) priority: Option<i32>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) backoff: Option<Backoff>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) delivery: Option<Delivery>,
    pub(crate) keep_result: Option<Duration>,
    pub(crate) max_stalled_count: Option<u32>,
    pub(crate) concurrency: Option<ConcurrencyLimit>,
}

macro_rules! option_setters {
    ($ty:ident $(. $inner:ident)?) => {
        impl $ty {
            /// The queue to put the job on. Defaults to `"default"`.
            pub fn queue(mut self, queue: impl Into<String>) -> Self {
                self$(.$inner)?.queue = Some(queue.into());
                self
            }
            /// Priority: smaller runs first among ready jobs. Defaults to 0.
            pub fn priority(mut self, priority: i32) -> Self {
                self$(.$inner)?.priority = Some(priority);
                self
            }
            /// How many attempts (the first run included) before the job fails
            /// for good. Defaults to the queue's `max_attempts`.
            pub fn max_attempts(mut self, attempts: u32) -> Self {
                self$(.$inner)?.max_attempts = Some(attempts);
                self
            }
            /// The wait before each retry. Defaults to the queue's backoff.
            pub fn backoff(mut self, backoff: Backoff) -> Self {
                self$(.$inner)?.backoff = Some(backoff);
                self
            }
            /// A deadline for each attempt, seen through [`JobContext`].
            /// Defaults to none.
            pub fn timeout(mut self, timeout: Duration) -> Self {
                self$(.$inner)?.timeout = Some(timeout);
                self
            }
            /// At-least-once (default) or at-most-once delivery.
            pub fn delivery(mut self, delivery: Delivery) -> Self {
                self$(.$inner)?.delivery = Some(delivery);
                self
            }
            /// How long a finished job and its result are kept (zero: deleted at
            /// once). Defaults to the queue's `keep_result`.
            pub fn keep_result(mut self, keep: Duration) -> Self {
                self$(.$inner)?.keep_result = Some(keep);
                self
            }
            /// How many times the job may be released after its process died
            /// before it fails instead. Defaults to the supervisor's setting.
            pub fn max_stalled_count(mut self, count: u32) -> Self {
                self$(.$inner)?.max_stalled_count = Some(count);
                self
            }
        }
    };
}

impl JobOptions {
    /// No overrides.
    pub fn new() -> JobOptions {
        JobOptions::default()
    }

    /// Limits how many jobs of this type with the same
    /// [`Job::concurrency_key`] run at once (see [`crate::concurrency`]).
    /// Defaults to no limit.
    pub fn concurrency(mut self, limit: ConcurrencyLimit) -> Self {
        self.concurrency = Some(limit);
        self
    }
}
option_setters!(JobOptions);

/// Options for one enqueue: everything in [`JobOptions`] plus when the job
/// should run and its unique key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnqueueOptions {
    pub(crate) job: JobOptions,
    pub(crate) delay: Option<Duration>,
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) unique_key: Option<String>,
}

impl EnqueueOptions {
    /// No overrides: the job type's defaults apply.
    pub fn new() -> EnqueueOptions {
        EnqueueOptions::default()
    }

    /// Run no earlier than `delay` from now (measured by the database's
    /// clock on PostgreSQL).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self.run_at = None;
        self
    }

    /// Run no earlier than `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self.delay = None;
        self
    }

    /// Deduplicate on this key: while a job with it exists (waiting,
    /// running, or finished and kept), another enqueue with it is refused.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }
}
option_setters!(EnqueueOptions.job);

/// What a running job can see about itself, and how it learns it should stop.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) id: i64,
    pub(crate) kind: String,
    pub(crate) queue: String,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    pub(crate) stalled_count: u32,
    pub(crate) enqueued_at: DateTime<Utc>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) shutdown: Arc<ShutdownSignal>,
}

impl JobContext {
    /// The job's id.
    pub fn job_id(&self) -> i64 {
        self.id
    }

    /// The job's kind (its type's `KIND`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The queue it was claimed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Which attempt this is, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The most attempts the job gets.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How many times the job was released because its process died.
    pub fn stalled_count(&self) -> u32 {
        self.stalled_count
    }

    /// When the job was enqueued.
    pub fn enqueued_at(&self) -> DateTime<Utc> {
        self.enqueued_at
    }

    /// The instant by which the job should return: its timeout, or the end of
    /// the worker's shutdown grace period, whichever is earlier.
    pub fn deadline(&self) -> Option<Instant> {
        match (self.deadline, self.shutdown.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True once the deadline has passed or the worker is shutting down: a
    /// long job should check this between steps and return early.
    pub fn is_cancelled(&self) -> bool {
        self.shutdown.is_requested() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Shared between a worker and its running jobs: set once when shutdown
/// begins, with the grace period's end.
#[derive(Debug, Default)]
pub(crate) struct ShutdownSignal {
    requested: AtomicBool,
    deadline: std::sync::OnceLock<Instant>,
}

impl ShutdownSignal {
    pub(crate) fn request(&self, grace: Duration) {
        let _ = self.deadline.set(Instant::now() + grace);
        self.requested.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline.get().copied()
    }
}

/// The error a job returns. Any `std::error::Error` converts into it with
/// `?`, keeping its type name as the error's kind and its source chain in the
/// message; [`JobError::new`] builds one by hand.
pub struct JobError {
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) backtrace: Option<String>,
    pub(crate) retry: bool,
}

impl JobError {
    /// An error with an explicit kind (a short class name, for grouping) and
    /// message.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> JobError {
        JobError {
            kind: kind.into(),
            message: message.into(),
            backtrace: None,
            retry: true,
        }
    }

    /// This failure is final: the job goes to failed now, whatever attempts
    /// it has left (a validation error, a deleted record).
    pub fn no_retry(mut self) -> JobError {
        self.retry = false;
        self
    }

    /// Whether the job may be retried after this error.
    pub fn is_retryable(&self) -> bool {
        self.retry
    }

    /// An error with just a message (kind `"error"`).
    pub fn msg(message: impl Into<String>) -> JobError {
        JobError::new("error", message)
    }

    /// The error's kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E> From<E> for JobError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> JobError {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        let backtrace = std::backtrace::Backtrace::capture();
        JobError {
            kind: std::any::type_name::<E>().to_string(),
            message,
            backtrace: (backtrace.status() == std::backtrace::BacktraceStatus::Captured)
                .then(|| backtrace.to_string()),
            retry: true,
        }
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobError({}: {})", self.kind, self.message)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// A recorded error: what a failed attempt left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A short class: the Rust error type, `"panic"`, `"timeout"`,
    /// `"unknown_kind"`, `"malformed_arguments"`, `"stalled"`…
    pub kind: String,
    /// The human-readable message.
    pub message: String,
    /// A backtrace or panic location, when one was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
    /// The attempt it ended (1-based), when it ended one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// When it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
    /// The wait chosen before the retry that followed, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

/// Where a job is in its lifecycle (ordered as listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for its run time (a delayed job).
    Scheduled,
    /// Waiting for a worker.
    Ready,
    /// Waiting for a concurrency slot.
    Blocked,
    /// Claimed by a worker.
    Running,
    /// Finished successfully; its result is kept until `keep_result` ends.
    Succeeded,
    /// Failed for good; kept until retried or discarded.
    Failed,
    /// Failed an attempt and waits for its retry time.
    Retrying,
    /// Not run: its concurrency limit was reached and its type discards on
    /// conflict. Kept until `keep_result` ends, like a finished job.
    Discarded,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Scheduled,
        JobStatus::Ready,
        JobStatus::Blocked,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Retrying,
        JobStatus::Discarded,
    ];

    /// The status's name, as shown by the CLI and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Scheduled => "scheduled",
            JobStatus::Ready => "ready",
            JobStatus::Blocked => "blocked",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Retrying => "retrying",
            JobStatus::Discarded => "discarded",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything known about one job, as a result query returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInfo {
    /// The job's id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its priority (smaller runs first).
    pub priority: i32,
    /// Its arguments, as stored.
    pub arguments: serde_json::Value,
    /// Where it is in its lifecycle.
    pub status: JobStatus,
    /// Attempts that have ended (succeeded, failed or timed out).
    pub attempts: u32,
    /// The most attempts it gets.
    pub max_attempts: u32,
    /// Times it was released because its process died.
    pub stalled_count: u32,
    /// Its delivery mode.
    pub delivery: Delivery,
    /// Its unique key, if any.
    pub unique_key: Option<String>,
    /// The key of its concurrency limit (`group/key`), if its type has one.
    pub concurrency_key: Option<String>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When it was (or will be) due.
    pub scheduled_at: DateTime<Utc>,
    /// When it finished, if it did.
    pub finished_at: Option<DateTime<Utc>>,
    /// When a retrying job runs next.
    pub retry_at: Option<DateTime<Utc>>,
    /// What it returned, if it succeeded.
    pub result: Option<serde_json::Value>,
    /// The last error (the final one for a failed job).
    pub error: Option<ErrorInfo>,
    /// Every attempt's error, oldest first.
    pub errors: Vec<ErrorInfo>,
    /// The process holding it, when running.
    pub process_id: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_grows_and_caps() {
        let b = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(10));
        let delays: Vec<u64> = (1..=6).map(|a| b.delay(a, 0.5).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let b = Backoff::fixed(Duration::from_secs(10)).with_jitter(0.2);
        assert_eq!(b.delay(1, 0.0), Duration::from_secs(8));
        assert_eq!(b.delay(1, 0.5), Duration::from_secs(10));
        assert!(b.delay(1, 0.999_999) <= Duration::from_secs(12));
    }

    #[test]
    fn default_options_are_stored_as_an_empty_object() {
        let stored = StoredOptions::default();
        assert_eq!(serde_json::to_string(&stored).unwrap(), "{}");
        assert_eq!(StoredOptions::parse("{}"), stored);
        let custom = StoredOptions {
            timeout_ms: Some(5),
            keep_result_ms: 0,
            backoff: Backoff::fixed(Duration::from_secs(1)),
            concurrency: None,
        };
        let json = serde_json::to_string(&custom).unwrap();
        assert_eq!(StoredOptions::parse(&json), custom);
    }

    #[test]
    fn std_errors_convert_with_their_type_and_chain() {
        let e: JobError = "x".parse::<i32>().unwrap_err().into();
        assert!(e.kind().contains("ParseIntError"), "{}", e.kind());
        assert!(e.message().contains("invalid digit"));
    }
}

/// The options stored with each job (its `options` column), resolved at
/// enqueue so a worker needs nothing but the job's row. A value equal to
/// solidq's default is left out (most jobs store `{}`) and read back as
/// that default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default = "default_keep_ms", skip_serializing_if = "is_default_keep")]
    pub keep_result_ms: u64,
    #[serde(
        default = "default_backoff",
        skip_serializing_if = "is_default_backoff"
    )]
    pub backoff: Backoff,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<StoredLimit>,
}

fn default_keep_ms() -> u64 {
    millis(crate::config::DEFAULT_KEEP_RESULT)
}

fn is_default_keep(ms: &u64) -> bool {
    *ms == default_keep_ms()
}

fn default_backoff() -> Backoff {
    crate::config::DEFAULT_BACKOFF
}

fn is_default_backoff(backoff: &Backoff) -> bool {
    *backoff == crate::config::DEFAULT_BACKOFF
}

impl Default for StoredOptions {
    fn default() -> Self {
        StoredOptions {
            timeout_ms: None,
            keep_result_ms: default_keep_ms(),
            backoff: default_backoff(),
            concurrency: None,
        }
    }
}

impl StoredOptions {
    /// Reads a row's options; a row written by hand with junk gets the
    /// defaults rather than failing the job for a bookkeeping field.
    pub(crate) fn parse(json: &str) -> StoredOptions {
        if json == "{}" {
            return StoredOptions::default();
        }
        serde_json::from_str(json).unwrap_or_else(|error| {
            log::warn!("unreadable job options {json:?} ({error}); using defaults");
            StoredOptions::default()
        })
    }
}
