//! Concurrency limits: at most `limit` jobs with the same key run (or wait
//! ready to run) at once, as SolidQueue's `limits_concurrency`. And rate
//! limits: at most `limit` jobs with the same key *start* per period
//! ([`RateLimit`], below).
//!
//! A job type opts in through [`crate::JobOptions::concurrency`] and says
//! which jobs share a limit through [`crate::Job::concurrency_key`]:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use solidq::{ConcurrencyLimit, Job, JobContext, JobOptions, JobResult};
//! use std::time::Duration;
//!
//! #[derive(Serialize, Deserialize)]
//! struct SyncAccount { account_id: i64 }
//!
//! impl Job for SyncAccount {
//!     const KIND: &'static str = "sync_account";
//!     fn perform(&self, _ctx: &JobContext) -> JobResult { Ok(serde_json::Value::Null) }
//!     fn options() -> JobOptions {
//!         // One sync per account at a time; a slot held longer than 5
//!         // minutes is presumed abandoned.
//!         JobOptions::new().concurrency(ConcurrencyLimit::new(1).duration(Duration::from_secs(300)))
//!     }
//!     fn concurrency_key(&self) -> Option<String> {
//!         Some(self.account_id.to_string())
//!     }
//! }
//! ```
//!
//! ## How it works
//!
//! Each key has a semaphore row counting its free slots. A limited job takes
//! a slot when it becomes ready (at enqueue, or when the dispatcher finds it
//! due); without one it waits in `blocked_executions` ([`OnConflict::Block`],
//! the default) or is discarded ([`OnConflict::Discard`]). When a holder
//! finishes, fails, or fails an attempt and waits for its retry, its slot is
//! given back and, in the same transaction, the next blocked job with the
//! same key (by priority, then id) takes it and becomes ready. Nothing about
//! semaphores happens while polling: only when a limited job starts waiting
//! or ends.
//!
//! A job released after its process died keeps its slot and goes back to
//! ready (it never gave the slot back); one that fails for good there gives
//! it back. `duration` bounds how long a slot can be lost: a semaphore not
//! touched for that long is deleted by the dispatcher, and blocked jobs
//! waiting longer than it are offered a slot again. Pick a duration longer
//! than the job's longest run plus the supervisor's `process_alive_threshold`:
//! a slot freed by expiry while its holder is only presumed dead lets one
//! more job run at once.

use std::time::Duration;

pub use crate::types::{DEFAULT_CONCURRENCY_DURATION, OnConflict};
use crate::types::{Error, Result};

/// The longest delay, timeout, retention or limit period solidq accepts:
/// 100 years, so timestamps never overflow.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `value` is at most [`MAX_DURATION`].
pub(crate) fn check_duration(option: &'static str, value: Duration) -> Result<()> {
    if value > MAX_DURATION {
        return Err(Error::InvalidOption {
            option,
            value: format!("{value:?}"),
            reason: "longer than 100 years".into(),
        });
    }
    Ok(())
}

/// A limit's count: 1 to `i32::MAX` (it is stored in an INTEGER column).
fn check_count(option: &'static str, limit: u32) -> Result<()> {
    if limit == 0 || i32::try_from(limit).is_err() {
        return Err(Error::InvalidOption {
            option,
            value: limit.to_string(),
            reason: format!("must be between 1 and {}", i32::MAX),
        });
    }
    Ok(())
}

/// A limit's period: 1 ms to 100 years.
fn check_period(option: &'static str, period: Duration) -> Result<()> {
    check_duration(option, period)?;
    if period < Duration::from_millis(1) {
        return Err(Error::InvalidOption {
            option,
            value: format!("{period:?}"),
            reason: "must be at least 1 ms".into(),
        });
    }
    Ok(())
}

/// A per-key limit on how many jobs run at once, set on a job type's
/// [`crate::JobOptions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrencyLimit {
    pub(crate) limit: u32,
    pub(crate) duration: Duration,
    pub(crate) on_conflict: OnConflict,
    pub(crate) group: Option<String>,
}

impl ConcurrencyLimit {
    /// At most `limit` jobs per key at once (1 to `i32::MAX`). Defaults: a
    /// duration of [`DEFAULT_CONCURRENCY_DURATION`], blocking on conflict,
    /// the job's kind as the group.
    ///
    /// The builder takes any value (it is written in [`crate::Job::options`],
    /// which cannot fail); [`ConcurrencyLimit::validate`] says whether it
    /// can work. A bad limit is refused, naming the value, by
    /// [`Worker::start`](crate::Worker::start) for every registered type and
    /// at every enqueue, before anything runs or is written.
    pub fn new(limit: u32) -> ConcurrencyLimit {
        ConcurrencyLimit {
            limit,
            duration: DEFAULT_CONCURRENCY_DURATION,
            on_conflict: OnConflict::Block,
            group: None,
        }
    }

    /// The longest a slot may be held before it is presumed abandoned.
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// What a job over the limit does: wait (default) or be discarded.
    pub fn on_conflict(mut self, on_conflict: OnConflict) -> Self {
        self.on_conflict = on_conflict;
        self
    }

    /// Shares the limit with other job types naming the same group (by
    /// default each kind is its own group).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Whether the limit can work: a limit of 1 to `i32::MAX` and a
    /// duration of 1 ms to 100 years; [`Error::InvalidOption`] naming the
    /// value otherwise.
    pub fn validate(&self) -> Result<()> {
        check_count("concurrency limit", self.limit)?;
        check_period("concurrency duration", self.duration)
    }

    /// The stored key: `group/key`, or the group alone when the job gives
    /// no key (then every job of the group shares one limit).
    pub(crate) fn full_key(&self, kind: &str, key: Option<String>) -> String {
        let group = self.group.as_deref().unwrap_or(kind);
        match key {
            Some(key) => format!("{group}/{key}"),
            None => group.to_string(),
        }
    }
}

/// A per-key limit on how many jobs start per period, set on a job type's
/// [`crate::JobOptions::rate_limit`], as Oban Pro's and BullMQ's rate
/// limits: for an API that allows 10 calls a second, say.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use solidq::{Job, JobContext, JobOptions, JobResult, RateLimit};
/// use std::time::Duration;
///
/// #[derive(Serialize, Deserialize)]
/// struct CallApi { customer: i64 }
///
/// impl Job for CallApi {
///     const KIND: &'static str = "call_api";
///     fn perform(&self, _ctx: &JobContext) -> JobResult { Ok(serde_json::Value::Null) }
///     fn options() -> JobOptions {
///         JobOptions::new().rate_limit(RateLimit::new(10, Duration::from_secs(1)))
///     }
///     // Ten a second per customer (by default, ten a second in all).
///     fn rate_key(&self) -> Option<String> {
///         Some(self.customer.to_string())
///     }
/// }
/// ```
///
/// ## How it works
///
/// The limit holds for starts, across every process and host. A worker
/// grants starts to the rate-limited jobs it has just claimed, in one short
/// transaction per claim on their keys' rows (locked, in key order; SQLite
/// has one writer): a job is granted when fewer than `limit` jobs of its key
/// started within the last `period` by the database's clock, and its start
/// is recorded. The others go back to the scheduled jobs, unstarted and
/// without spending an attempt or a snooze, for the moment a start frees
/// up; jobs sent back are spread `period / limit` apart, so they come back
/// one by one instead of all being claimed again at once. The dispatcher
/// makes them ready when due. Rate-limited kinds are never claimed ahead: a
/// worker claims them only for idle threads, which start them at once.
///
/// Accuracy: in any window of `period`, at most `limit` starts plus those whose
/// code began more than the grant's lag after their grant (from the grant's
/// commit to the job's first line: about a round trip; more under a stalled
/// process). The tests count every start of 3 processes at 10 a second for
/// 10 s, with a 50 ms margin. Throughput stays below the limit by the
/// dispatcher's polling interval between a deferred job's turn and its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub(crate) limit: u32,
    pub(crate) period: Duration,
    pub(crate) group: Option<String>,
}

impl RateLimit {
    /// At most `limit` starts (1 to `i32::MAX`) per `period` (1 ms to 100
    /// years) per key; the job's kind is the group. As
    /// [`ConcurrencyLimit::new`], it takes any value;
    /// [`RateLimit::validate`] checks it, and a bad one is refused, naming
    /// the value, by [`Worker::start`](crate::Worker::start) and at enqueue.
    pub fn new(limit: u32, period: Duration) -> RateLimit {
        RateLimit {
            limit,
            period,
            group: None,
        }
    }

    /// Shares the limit with other job types naming the same group.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Whether the limit can work: 1 to `i32::MAX` starts per 1 ms to 100
    /// years; [`Error::InvalidOption`] naming the value otherwise.
    pub fn validate(&self) -> Result<()> {
        check_count("rate limit", self.limit)?;
        check_period("rate limit period", self.period)
    }

    /// The stored key: `group/key`, or the group alone.
    pub(crate) fn full_key(&self, kind: &str, key: Option<String>) -> String {
        let group = self.group.as_deref().unwrap_or(kind);
        match key {
            Some(key) => format!("{group}/{key}"),
            None => group.to_string(),
        }
    }
}
