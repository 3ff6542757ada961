//! The events of a job's life, in the order they happen.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A job was inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobEnqueued {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its priority (smaller runs first).
    pub priority: i32,
    /// When it is due, if it was enqueued for later (a delay or a run
    /// time); `None` when it is due at once. Delays are resolved on this
    /// host's clock.
    pub run_at: Option<DateTime<Utc>>,
}

/// A worker claimed a job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobClaimed {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its priority.
    pub priority: i32,
    /// The attempt about to run, from 1. A stall does not use an attempt:
    /// a job released after its process died runs the same attempt again.
    pub attempt: u32,
    /// How many times it stalled before.
    pub stalled_count: u32,
    /// The claiming worker's process row.
    pub process_id: i64,
    /// The queue latency: from when the job became due (enqueued, its run
    /// time, its retry time, or its release after a stall) to this claim,
    /// on the database's clock. It includes time spent blocked by a
    /// concurrency limit or in a paused queue.
    pub wait: Duration,
    /// When it was enqueued.
    pub enqueued_at: DateTime<Utc>,
}

/// An attempt succeeded and its result was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSucceeded {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that succeeded, from 1.
    pub attempt: u32,
    /// The worker's process row.
    pub process_id: i64,
    /// How long the attempt ran.
    pub run_time: Duration,
    /// When it was enqueued: with the time of this event, the job's whole
    /// latency.
    pub enqueued_at: DateTime<Utc>,
}

/// An attempt failed; a retry is scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobRetried {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// The worker's process row.
    pub process_id: i64,
    /// How long the attempt ran.
    pub run_time: Duration,
    /// How long until the retry is due.
    pub delay: Duration,
    /// The error's kind (`panic`, `timeout`, or the job's own).
    pub error_kind: String,
    /// The error's message.
    pub error: String,
}

/// A job handed itself back without spending an attempt: it snoozed, or
/// stopped when asked to at shutdown (`delay` zero).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSnoozed {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that ran, from 1; the next run is the same attempt.
    pub attempt: u32,
    /// The worker's process row.
    pub process_id: i64,
    /// How long it ran before handing itself back.
    pub run_time: Duration,
    /// How long until it is due again.
    pub delay: Duration,
}

/// A job an operator cancelled while it ran (or before a claim of it
/// started) ended and was recorded as discarded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobCancelled {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that ran (or would have), from 1.
    pub attempt: u32,
    /// The worker's process row.
    pub process_id: i64,
    /// How long it ran after being claimed.
    pub run_time: Duration,
}

/// An attempt failed and the job failed for good.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFailed {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// The worker's process row.
    pub process_id: i64,
    /// How long the attempt ran.
    pub run_time: Duration,
    /// The error's kind (`panic`, `timeout`, `unknown_kind`,
    /// `malformed_arguments`, or the job's own).
    pub error_kind: String,
    /// The error's message.
    pub error: String,
}

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

/// Why a stopping process handed a job back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseCause {
    /// The job had not started: its worker stopped before it did, or died
    /// (or was pruned) while holding it claimed ahead.
    NotStarted,
    /// The job was still claimed (running, or its outcome not yet
    /// recorded) when the worker's `shutdown_timeout` ended.
    ShutdownTimeout,
    /// Its supervisor killed the worker after the shutdown grace period.
    KilledAtShutdown,
}

/// A claimed job handed back to ready without counting a stall (a
/// stopping process's, or one a dead process held but never started), or
/// failed when it is at-most-once and had started.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobReleased {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The process that held it.
    pub process_id: i64,
    /// Why it was handed back.
    pub cause: ReleaseCause,
    /// `Some(error)` when it was failed instead of released.
    pub failed: Option<String>,
}

/// A job discarded at its concurrency limit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobDiscarded {
    /// The job.
    pub job_id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The key whose limit was reached (`group/key`).
    pub concurrency_key: String,
    /// That limit.
    pub limit: u32,
}

impl JobDiscarded {
    /// The event of a job the store discarded.
    pub(crate) fn of(job: &crate::store::LimitedJob) -> JobDiscarded {
        let slot = job.slot();
        JobDiscarded {
            job_id: job.job_id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
            concurrency_key: slot.key,
            limit: slot.limit.limit,
        }
    }
}

impl JobEnqueued {
    /// The event of `job`, inserted as `job_id`; a delay is resolved
    /// against `now`.
    pub(crate) fn of(job: &crate::store::NewJob, job_id: i64, now: DateTime<Utc>) -> JobEnqueued {
        let run_at = match job.run_at {
            Some(at) => Some(at.and_utc()),
            None if !job.delay.is_zero() => chrono::Duration::from_std(job.delay)
                .ok()
                .and_then(|delay| now.checked_add_signed(delay)),
            None => None,
        };
        JobEnqueued {
            job_id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
            priority: job.priority,
            run_at,
        }
    }
}

impl JobClaimed {
    /// The event of `job`, just claimed by `process_id`.
    pub(crate) fn of(job: &crate::store::ClaimedJob, process_id: i64) -> JobClaimed {
        JobClaimed {
            job_id: job.id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
            priority: job.priority,
            attempt: u32::try_from(job.attempts).unwrap_or(0).saturating_add(1),
            stalled_count: u32::try_from(job.stalled_count).unwrap_or(0),
            process_id,
            wait: super::elapsed(job.due_at, job.claimed_at),
            enqueued_at: job.created_at.and_utc(),
        }
    }
}
