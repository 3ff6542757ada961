//! A job's plain data: how it is delivered, how it backs off, where it is in
//! its lifecycle, and what a query reports about it.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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

/// A recorded error: what a failed attempt left behind.
///
/// Its text is stored as JSON. A NUL character (`\0`) in the kind, message
/// or backtrace is stored as U+FFFD (`�`): PostgreSQL cannot keep `\u0000`
/// in JSON, and one such error must not stop others from being recorded.
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

impl ErrorInfo {
    /// The backtrace without the frames of solidq, the standard library
    /// and the runtime (thread start, panic machinery), with a last line
    /// saying how many were hidden: what `solidq job ID` (unless `--full`)
    /// and the dashboard's job page show first.
    pub fn user_backtrace(&self) -> Option<String> {
        self.backtrace.as_deref().map(super::backtrace::user_frames)
    }

    /// The JSON stored for this error, NUL characters replaced (see the
    /// type's docs).
    pub(crate) fn to_stored_json(&self) -> String {
        let clean = ErrorInfo {
            kind: without_nul(&self.kind),
            message: without_nul(&self.message),
            backtrace: self.backtrace.as_deref().map(without_nul),
            ..self.clone()
        };
        serde_json::to_string(&clean).expect("error info serializes")
    }
}

/// `text` with every NUL character replaced by U+FFFD.
fn without_nul(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

/// Where a job is in its lifecycle (ordered as listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for its run time (a delayed job).
    Scheduled,
    /// Waiting for other members of its batch to end (see
    /// [`crate::workflow`]).
    Waiting,
    /// Waiting for a worker.
    Ready,
    /// Waiting for a concurrency slot.
    Blocked,
    /// Claimed by a worker ahead, waiting for one of its threads (it will
    /// start within a claim round trip).
    Claimed,
    /// Claimed by a worker and started.
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
    pub const ALL: [JobStatus; 10] = [
        JobStatus::Scheduled,
        JobStatus::Waiting,
        JobStatus::Ready,
        JobStatus::Blocked,
        JobStatus::Claimed,
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
            JobStatus::Waiting => "waiting",
            JobStatus::Ready => "ready",
            JobStatus::Blocked => "blocked",
            JobStatus::Claimed => "claimed",
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
    /// Its tenant for fair share (`Job::fairness_key`), if any.
    pub fairness_key: Option<String>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When it was (or will be) due.
    pub scheduled_at: DateTime<Utc>,
    /// When its current attempt started, while it is running; otherwise
    /// when its last attempt started (a finished, failed, retrying or
    /// cancelled job keeps it, so its duration is `finished_at` less this);
    /// `None` before any attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished, if it did.
    pub finished_at: Option<DateTime<Utc>>,
    /// When it failed for good, while it is failed (a failed job has not
    /// finished: an operator may retry it).
    pub failed_at: Option<DateTime<Utc>>,
    /// When a retrying job runs next.
    pub retry_at: Option<DateTime<Utc>>,
    /// What it returned, if it succeeded.
    pub result: Option<serde_json::Value>,
    /// The error that put the job where it is: the final one of a failed
    /// or cancelled job, the last attempt's of a retrying one, the stall's
    /// of a job released after its process died. `None` once it succeeded
    /// and while an attempt runs: earlier attempts' errors are in
    /// [`JobInfo::errors`].
    pub error: Option<ErrorInfo>,
    /// Every attempt's error, oldest first.
    pub errors: Vec<ErrorInfo>,
    /// The process holding it, when claimed or running.
    pub process_id: Option<i64>,
    /// Times it handed itself back without spending an attempt (snoozes,
    /// interruptions at shutdown).
    pub snoozes: u32,
    /// The progress its current (or last) attempt reported with
    /// `JobContext::set_progress`, as last written.
    pub progress: Option<serde_json::Value>,
    /// Its resumable steps (`JobContext::step`), as last written: the
    /// finished steps (`done`), and the step in progress with its last
    /// cursor (`step`, `cursor`).
    pub checkpoint: Option<serde_json::Value>,
    /// The batch it is a member of (`Queue::batch_info` has its counts).
    pub batch_id: Option<i64>,
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
}
