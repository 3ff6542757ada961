//! What a job is: the [`Job`] trait, its options, the [`JobContext`] it runs
//! with, the [`JobError`] it may return, the [`Middleware`] that wraps it,
//! and the shared state a worker gives it.

mod context;
mod middleware;
mod state;
mod steps;

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::concurrency::{ConcurrencyLimit, check_duration};
use crate::types::{Backoff, Delivery, Error, ErrorInfo, Result, validate_queue_name};

pub use context::JobContext;
pub(crate) use context::{ProgressCell, ShutdownSignal, Standing};
pub(crate) use middleware::run_chain;
pub use middleware::{Middleware, Next};
pub(crate) use state::StateMap;
pub use steps::Step;
pub(crate) use steps::StepBook;

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
    /// A panic here is caught and logged; the job then waits by `policy`.
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

    /// Which jobs share a rate limit, when the type sets one
    /// ([`JobOptions::rate_limit`]): jobs whose keys are equal count
    /// against the same limit. The default, `None`, puts every job of the
    /// type under one limit. Computed once, at enqueue.
    fn rate_key(&self) -> Option<String> {
        None
    }

    /// The tenant the job belongs to, for fair share: when several keys
    /// have jobs ready in one queue and priority, claims take them in
    /// turns, so one key's burst does not hold back another key's job (see
    /// the README's "Fair share across tenants"). The default, `None`,
    /// keeps the job in plain enqueue order. [`EnqueueOptions::fairness_key`]
    /// overrides it. Computed once, at enqueue; 1 to 255 bytes.
    fn fairness_key(&self) -> Option<String> {
        None
    }
}

/// What [`Job::perform`] returns: a JSON result or a [`JobError`].
pub type JobResult = Result<serde_json::Value, JobError>;

/// Per-type defaults for a job's options; every field is optional and falls
/// back to the queue's configuration. Built with chained setters, returned
/// by [`Job::options`].
///
/// This is also where a type's **concurrency limit** ([`JobOptions::concurrency`],
/// keyed by [`Job::concurrency_key`]) and **rate limit**
/// ([`JobOptions::rate_limit`], keyed by [`Job::rate_key`]) live: they are
/// not [`EnqueueOptions`] or worker settings, because every job of the type
/// shares them. An impossible value (a limit of 0, a zero timeout) is
/// refused by [`Worker::start`](crate::Worker::start) and at enqueue with
/// [`Error::InvalidOption`](crate::Error::InvalidOption); see
/// [`JobOptions::validate`]. More: the guide's
/// [options](crate::guide::options) and [limits](crate::guide::limits).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use solidq::{Backoff, ConcurrencyLimit, Job, JobContext, JobOptions, JobResult, RateLimit};
/// use std::time::Duration;
///
/// #[derive(Serialize, Deserialize)]
/// struct SyncAccount { account_id: i64 }
///
/// impl Job for SyncAccount {
///     const KIND: &'static str = "sync_account";
///     fn perform(&self, _ctx: &JobContext) -> JobResult {
///         Ok(serde_json::json!({ "synced": self.account_id }))
///     }
///     fn options() -> JobOptions {
///         JobOptions::new()
///             .queue("sync")
///             .max_attempts(5)
///             .backoff(Backoff::exponential(Duration::from_secs(10), Duration::from_secs(3600)))
///             .timeout(Duration::from_secs(30))
///             // one sync per account at a time:
///             .concurrency(ConcurrencyLimit::new(1))
///             // at most ten starts a second per account:
///             .rate_limit(RateLimit::new(10, Duration::from_secs(1)))
///     }
///     fn concurrency_key(&self) -> Option<String> {
///         Some(self.account_id.to_string())
///     }
///     fn rate_key(&self) -> Option<String> {
///         Some(self.account_id.to_string())
///     }
/// }
/// assert!(SyncAccount::options().validate().is_ok());
/// ```
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
    pub(crate) max_snoozes: Option<u32>,
    pub(crate) rate_limit: Option<crate::concurrency::RateLimit>,
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
            /// How many times the job may hand itself back without spending
            /// an attempt ([`JobError::snooze`], [`JobError::interrupted`]);
            /// the snooze after that fails it (error kind `snoozed_too_often`).
            /// Defaults to [`DEFAULT_MAX_SNOOZES`](crate::config::DEFAULT_MAX_SNOOZES).
            pub fn max_snoozes(mut self, snoozes: u32) -> Self {
                self$(.$inner)?.max_snoozes = Some(snoozes);
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

    /// Limits how many jobs of this type with the same [`Job::rate_key`]
    /// start per period (see [`crate::concurrency::RateLimit`]). Defaults
    /// to no limit.
    pub fn rate_limit(mut self, limit: crate::concurrency::RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Whether every option set can work: a plain queue name, 1 to
    /// `i32::MAX` attempts, a timeout longer than zero, durations up to 100
    /// years, and valid concurrency and rate limits; the first
    /// [`Error::InvalidOption`] found, naming the value, otherwise. The
    /// setters take any value (a type's `options()` cannot fail):
    /// [`Worker::start`](crate::Worker::start) checks every registered
    /// type's options with this, and every enqueue checks what it
    /// resolves, so a bad value is refused before anything runs or is
    /// written.
    pub fn validate(&self) -> Result<()> {
        if let Some(queue) = &self.queue {
            validate_queue_name(queue)?;
        }
        if let Some(attempts) = self.max_attempts {
            check_max_attempts(attempts)?;
        }
        if let Some(timeout) = self.timeout {
            check_timeout(timeout)?;
        }
        if let Some(keep) = self.keep_result {
            check_duration("keep_result", keep)?;
        }
        if let Some(limit) = &self.concurrency {
            limit.validate()?;
        }
        if let Some(limit) = &self.rate_limit {
            limit.validate()?;
        }
        Ok(())
    }
}
option_setters!(JobOptions);

/// `max_attempts`: 1 to `i32::MAX` (an INTEGER column); as stored.
pub(crate) fn check_max_attempts(attempts: u32) -> Result<i32> {
    i32::try_from(attempts)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| Error::InvalidOption {
            option: "max_attempts",
            value: attempts.to_string(),
            reason: format!("must be between 1 and {}", i32::MAX),
        })
}

/// `timeout`: longer than zero, at most 100 years.
pub(crate) fn check_timeout(timeout: Duration) -> Result<()> {
    check_duration("timeout", timeout)?;
    if timeout.is_zero() {
        return Err(Error::InvalidOption {
            option: "timeout",
            value: "0s".into(),
            reason: "must be longer than zero (leave it unset for none)".into(),
        });
    }
    Ok(())
}

/// Options for one enqueue: everything in [`JobOptions`] plus when the job
/// should run and its unique key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnqueueOptions {
    pub(crate) job: JobOptions,
    pub(crate) delay: Option<Duration>,
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) unique_key: Option<String>,
    pub(crate) fairness_key: Option<String>,
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

    /// The job's tenant for fair share, over [`Job::fairness_key`]: jobs
    /// of different keys ready in one queue and priority are claimed in
    /// turns (see [`Job::fairness_key`]).
    pub fn fairness_key(mut self, key: impl Into<String>) -> Self {
        self.fairness_key = Some(key.into());
        self
    }
}
option_setters!(EnqueueOptions.job);

/// The error a job returns. Any `std::error::Error` converts into it with
/// `?`, keeping its type name as the error's kind and its source chain in the
/// message; [`JobError::new`] builds one by hand.
///
/// Two constructors are not failures: [`JobError::snooze`] and
/// [`JobError::interrupted`] hand the job back without spending an attempt.
pub struct JobError {
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) backtrace: Option<String>,
    pub(crate) retry: bool,
    pub(crate) hand_back: Option<HandBack>,
}

/// How a job handed itself back instead of failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandBack {
    /// Run again after this long.
    Snooze(Duration),
    /// Asked to stop (shutdown): ready again at once, for another worker.
    Interrupted,
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
            hand_back: None,
        }
    }

    /// Not a failure: hand the job back to run again after `delay`, without
    /// spending an attempt (River's `JobSnooze`, Oban's `{:snooze, n}`) —
    /// for a resource that is not ready yet, a rate limit, a poll. The job
    /// is scheduled `delay` from now (by the database's clock), its attempt
    /// count unchanged; each snooze is counted, and one past the job's
    /// `max_snoozes` (default
    /// [`DEFAULT_MAX_SNOOZES`](crate::config::DEFAULT_MAX_SNOOZES)) fails
    /// it with `snoozed_too_often` instead. A job under a concurrency limit
    /// gives its slot back while it waits.
    ///
    /// ```
    /// # use solidq::{JobContext, JobError, JobResult};
    /// # fn export_ready() -> bool { false }
    /// fn perform(ctx: &JobContext) -> JobResult {
    ///     if !export_ready() {
    ///         return Err(JobError::snooze(std::time::Duration::from_secs(30)));
    ///     }
    ///     Ok(serde_json::Value::Null)
    /// }
    /// ```
    pub fn snooze(delay: Duration) -> JobError {
        JobError {
            hand_back: Some(HandBack::Snooze(delay)),
            ..JobError::new("snooze", format!("snoozed for {delay:?}"))
        }
    }

    /// Not a failure: the job stopped because it was asked to (it saw
    /// [`JobContext::is_cancelled`] during a shutdown) and goes back to ready
    /// at once for another worker, without spending an attempt — two deploys
    /// in a row do not fail a well-behaved job. Counted like a
    /// [`snooze`](JobError::snooze). When the attempt's own timeout has
    /// passed, the attempt fails by timeout instead.
    ///
    /// ```
    /// # use solidq::{JobContext, JobError, JobResult};
    /// fn perform(ctx: &JobContext) -> JobResult {
    ///     for _batch in 0..1000 {
    ///         if ctx.is_cancelled() {
    ///             return Err(JobError::interrupted());
    ///         }
    ///         // ... one batch of work, idempotent ...
    ///     }
    ///     Ok(serde_json::Value::Null)
    /// }
    /// ```
    pub fn interrupted() -> JobError {
        JobError {
            hand_back: Some(HandBack::Interrupted),
            ..JobError::new("interrupted", "stopped when asked to; handed back")
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
            hand_back: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_errors_convert_with_their_type_and_chain() {
        let e: JobError = "x".parse::<i32>().unwrap_err().into();
        assert!(e.kind().contains("ParseIntError"), "{}", e.kind());
        assert!(e.message().contains("invalid digit"));
    }
}
