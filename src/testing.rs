//! Helpers for testing an app's own jobs, in the spirit of Oban.Testing,
//! rivertest and Sidekiq::Testing: a throwaway database, assertions on what
//! was enqueued, and [`Worker::drain`](crate::Worker::drain) to run the
//! jobs in the test's own thread — no threads, no sleeps, milliseconds per
//! test.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use solidq::testing::{TestQueue, assert_enqueued};
//! use solidq::{Job, JobContext, JobResult, Worker};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendEmail { to: String }
//!
//! impl Job for SendEmail {
//!     const KIND: &'static str = "send_email";
//!     fn perform(&self, _ctx: &JobContext) -> JobResult {
//!         Ok(serde_json::json!({ "sent": self.to }))
//!     }
//! }
//!
//! // The code under test enqueues…
//! let test = TestQueue::new()?;
//! test.queue().enqueue(&SendEmail { to: "a@example.com".into() })?;
//! // …the test checks what it enqueued…
//! assert_enqueued(test.queue(), &SendEmail { to: "a@example.com".into() });
//! // …and runs it, here and now.
//! let drained = Worker::new(test.queue().clone()).register::<SendEmail>().drain()?;
//! assert_eq!(drained.succeeded, 1);
//! # Ok::<(), solidq::Error>(())
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::admin::JobFilter;
use crate::client::Queue;
use crate::job::Job;
use crate::types::{Error, JobInfo, JobStatus, Result};

/// A queue on a database of its own for one test: by default a new SQLite
/// file in the temporary directory, migrated, and deleted (with its WAL
/// files) when the `TestQueue` is dropped.
pub struct TestQueue {
    queue: Queue,
    file: Option<PathBuf>,
}

impl TestQueue {
    /// A queue on a fresh, migrated SQLite file of its own.
    pub fn new() -> Result<TestQueue> {
        static N: AtomicU64 = AtomicU64::new(0);
        let file = std::env::temp_dir().join(format!(
            "solidq-test-{}-{}-{:x}.sqlite3",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            fastrand::u64(..)
        ));
        let queue = Queue::connect(&format!("sqlite://{}", file.display()))?;
        let test = TestQueue {
            queue,
            file: Some(file),
        };
        test.queue.migrate()?;
        Ok(test)
    }

    /// A queue on a database the caller provides and owns (for example a
    /// PostgreSQL schema made for the test: `postgres://…?options=-csearch_path%3Dt1`),
    /// migrated. Nothing is deleted at drop.
    pub fn connect(url: &str) -> Result<TestQueue> {
        let queue = Queue::connect(url)?;
        queue.migrate()?;
        Ok(TestQueue { queue, file: None })
    }

    /// The queue: hand clones of it to the code under test.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
            }
        }
    }
}

/// The jobs of `J`'s kind that wait to run (ready, scheduled, retrying or
/// blocked), oldest first, with their arguments read back as `J` (at most
/// [`WAITING_LIMIT`] per status).
pub fn enqueued<J: Job>(queue: &Queue) -> Result<Vec<(JobInfo, J)>> {
    let waiting = waiting_of(queue, J::KIND)?;
    waiting
        .into_iter()
        .map(|info| {
            let job = J::deserialize(&info.arguments).map_err(|e| Error::InvalidOption {
                option: "arguments",
                value: info.arguments.to_string(),
                reason: format!("do not deserialize as kind {:?}: {e}", J::KIND),
            })?;
            Ok((info, job))
        })
        .collect()
}

/// Panics unless a job of `J`'s kind with exactly `job`'s arguments waits
/// to run; the message lists the jobs of that kind that do. Returns it.
pub fn assert_enqueued<J: Job>(queue: &Queue, job: &J) -> JobInfo {
    let wanted = serde_json::to_value(job).expect("job arguments serialize");
    find(queue, J::KIND, |arguments| *arguments == wanted, &wanted)
}

/// Panics unless a job of `J`'s kind waits to run whose arguments contain
/// `subset` (every key of an object, recursively; other values equal), as
/// Oban's `assert_enqueued args: …`. Returns it.
pub fn assert_enqueued_matching<J: Job>(queue: &Queue, subset: serde_json::Value) -> JobInfo {
    find(
        queue,
        J::KIND,
        |arguments| contains(arguments, &subset),
        &subset,
    )
}

/// Panics if any job of `J`'s kind waits to run.
pub fn assert_not_enqueued<J: Job>(queue: &Queue) {
    let waiting = waiting_of(queue, J::KIND).unwrap_or_else(|e| panic!("cannot list jobs: {e}"));
    assert!(
        waiting.is_empty(),
        "expected no {:?} job waiting, found {}: {}",
        J::KIND,
        waiting.len(),
        describe(&waiting)
    );
}

fn find(
    queue: &Queue,
    kind: &str,
    matches: impl Fn(&serde_json::Value) -> bool,
    wanted: &serde_json::Value,
) -> JobInfo {
    let waiting = waiting_of(queue, kind).unwrap_or_else(|e| panic!("cannot list jobs: {e}"));
    match waiting.iter().find(|info| matches(&info.arguments)) {
        Some(found) => found.clone(),
        None => panic!(
            "expected a {kind:?} job waiting with arguments {wanted}; {} of that kind wait{}",
            waiting.len(),
            if waiting.is_empty() {
                String::new()
            } else {
                format!(": {}", describe(&waiting))
            }
        ),
    }
}

/// The most jobs of one kind and status the helpers look at.
pub const WAITING_LIMIT: usize = 10_000;

/// The jobs of `kind` waiting to run, oldest first (at most
/// [`WAITING_LIMIT`] per status).
fn waiting_of(queue: &Queue, kind: &str) -> Result<Vec<JobInfo>> {
    let mut waiting = Vec::new();
    for status in [
        JobStatus::Ready,
        JobStatus::Scheduled,
        JobStatus::Retrying,
        JobStatus::Blocked,
    ] {
        waiting.extend(
            queue.jobs(
                &JobFilter::new()
                    .kind(kind)
                    .status(status)
                    .limit(WAITING_LIMIT),
            )?,
        );
    }
    waiting.sort_by_key(|info| info.id);
    Ok(waiting)
}

fn describe(jobs: &[JobInfo]) -> String {
    jobs.iter()
        .map(|j| format!("#{} {} {}", j.id, j.status.as_str(), j.arguments))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether `value` contains `subset`: objects key by key, recursively;
/// anything else equal.
fn contains(value: &serde_json::Value, subset: &serde_json::Value) -> bool {
    match (value, subset) {
        (serde_json::Value::Object(v), serde_json::Value::Object(s)) => s
            .iter()
            .all(|(k, sv)| v.get(k).is_some_and(|vv| contains(vv, sv))),
        _ => value == subset,
    }
}

#[cfg(test)]
mod tests {
    use super::contains;
    use serde_json::json;

    #[test]
    fn subsets_match_key_by_key() {
        let args = json!({ "user": { "id": 7, "name": "a" }, "n": 1 });
        assert!(contains(&args, &json!({ "user": { "id": 7 } })));
        assert!(contains(&args, &json!({})));
        assert!(!contains(&args, &json!({ "user": { "id": 8 } })));
        assert!(!contains(&args, &json!({ "missing": 1 })));
        assert!(!contains(&json!([1, 2]), &json!([1])));
    }
}
