//! Concurrency limits as stored with a job: what the store needs to take
//! and give back a slot without the job's type.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a slot may be held before it is presumed abandoned: 3 minutes,
/// as SolidQueue.
pub const DEFAULT_CONCURRENCY_DURATION: Duration = Duration::from_secs(180);

/// What happens to a job that finds every slot of its key taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    /// It waits in blocked_executions until a slot frees. The default.
    #[default]
    Block,
    /// It is not run: it ends at once with status
    /// [`crate::JobStatus::Discarded`] (kept for its `keep_result`).
    Discard,
}

/// A limit as stored in a job's options: what the store needs to take and
/// give back its slot without the job's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredLimit {
    pub limit: u32,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "is_block")]
    pub on_conflict: OnConflict,
}

fn is_block(o: &OnConflict) -> bool {
    *o == OnConflict::Block
}

impl StoredLimit {
    pub(crate) fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
}

/// A rate limit as stored in a job's options: its key (`group/key`, or the
/// kind alone), at most `limit` starts per `period_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredRate {
    pub key: String,
    pub limit: u32,
    pub period_ms: u64,
}

impl StoredRate {
    pub(crate) fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }
}
