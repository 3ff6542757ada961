//! The OpenAPI schemas of the objects solidq's library defines and the
//! API returns as the library serializes them (snake_case): a job, an
//! error, a queue, a process, a recurring task. These types only
//! describe; a test checks each against the serialization of the real
//! type, so the document cannot drift from what is sent.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde_json::Value;
use utoipa::ToSchema;

/// A job, as `JobInfo` serializes.
#[derive(ToSchema)]
#[schema(as = Job)]
pub struct JobSchema {
    /// Its id.
    id: i64,
    /// Its kind.
    kind: String,
    /// Its queue.
    queue: String,
    /// Its priority (smaller runs first).
    priority: i32,
    /// Its arguments, keys such as `password` shown as `[FILTERED]`.
    #[schema(value_type = Object)]
    arguments: Value,
    /// scheduled, ready, blocked, claimed, running, succeeded, failed,
    /// retrying or discarded.
    #[schema(example = "ready")]
    status: String,
    /// Attempts that have ended.
    attempts: u32,
    /// The most attempts it gets.
    max_attempts: u32,
    /// Times it was released because its process died.
    stalled_count: u32,
    /// at_least_once or at_most_once.
    delivery: String,
    /// Its unique key (the API's `uniqueId`).
    unique_key: Option<String>,
    /// The key of its concurrency limit.
    concurrency_key: Option<String>,
    /// Its tenant for fair share.
    fairness_key: Option<String>,
    /// When it was enqueued.
    created_at: DateTime<Utc>,
    /// When it was (or will be) due.
    scheduled_at: DateTime<Utc>,
    /// When its current attempt started.
    started_at: Option<DateTime<Utc>>,
    /// When it finished.
    finished_at: Option<DateTime<Utc>>,
    /// When it failed for good.
    failed_at: Option<DateTime<Utc>>,
    /// When a retrying job runs next.
    retry_at: Option<DateTime<Utc>>,
    /// What it returned, if it succeeded.
    #[schema(value_type = Option<Object>)]
    result: Option<Value>,
    /// The last error.
    error: Option<ErrorInfoSchema>,
    /// Every attempt's error, oldest first.
    errors: Vec<ErrorInfoSchema>,
    /// The process holding it.
    process_id: Option<i64>,
    /// Times it handed itself back without spending an attempt.
    snoozes: u32,
    /// The progress its attempt reported.
    #[schema(value_type = Option<Object>)]
    progress: Option<Value>,
    /// Its resumable steps: `done` (finished steps), `step` and `cursor`
    /// (the step in progress and its last checkpoint).
    #[schema(value_type = Option<Object>)]
    checkpoint: Option<Value>,
    /// The batch it is a member of.
    batch_id: Option<i64>,
}

/// A failed attempt's error, as `ErrorInfo` serializes.
#[derive(ToSchema)]
#[schema(as = JobError)]
pub struct ErrorInfoSchema {
    /// A short class: the Rust error type, `panic`, `timeout`…
    kind: String,
    /// The message.
    message: String,
    /// A backtrace, when one was captured.
    backtrace: Option<String>,
    /// The attempt it ended.
    attempt: Option<u32>,
    /// When it was recorded.
    at: Option<DateTime<Utc>>,
    /// The wait chosen before the retry that followed, in milliseconds.
    retry_in_ms: Option<u64>,
}

/// A queue, as `QueueStats` serializes.
#[derive(ToSchema)]
#[schema(as = QueueInfo)]
pub struct QueueSchema {
    /// Its name.
    name: String,
    /// Jobs waiting for a worker.
    ready: u64,
    /// Jobs waiting for their first run time.
    scheduled: u64,
    /// Jobs waiting for a retry.
    retrying: u64,
    /// Jobs claimed, not started.
    claimed: u64,
    /// Jobs running.
    running: u64,
    /// Jobs waiting for a concurrency slot.
    blocked: u64,
    /// Jobs failed for good.
    failed: u64,
    /// Workflow members waiting for their parents.
    waiting: u64,
    /// How long the oldest ready job has waited, as a humantime string
    /// (`"1s 200ms"`); null when nothing is ready.
    latency: Option<String>,
    /// Whether workers skip it.
    paused: bool,
}

/// A process, as `ProcessInfo` serializes.
#[derive(ToSchema)]
#[schema(as = ProcessInfo)]
pub struct ProcessSchema {
    /// Its row id.
    id: i64,
    /// worker, dispatcher, scheduler or supervisor.
    kind: String,
    /// Its name.
    name: String,
    /// Its host.
    hostname: String,
    /// Its OS pid.
    pid: i32,
    /// The supervisor that spawned it.
    supervisor_id: Option<i64>,
    /// Its last heartbeat.
    last_heartbeat_at: DateTime<Utc>,
    /// How long ago that was, in milliseconds.
    heartbeat_age_ms: u64,
    /// When it registered.
    created_at: DateTime<Utc>,
    /// What it said about itself (queues, threads…).
    #[schema(value_type = Object)]
    metadata: Value,
    /// The jobs it holds.
    jobs: Vec<i64>,
}

/// A recurring task, as `RecurringInfo` serializes.
#[derive(ToSchema)]
#[schema(as = RecurringTask)]
pub struct RecurringSchema {
    /// Its key.
    key: String,
    /// Its cron expression.
    schedule: String,
    /// The time zone it is read in.
    timezone: String,
    /// The kind of job it enqueues.
    kind: String,
    /// Its jobs' arguments, filtered.
    #[schema(value_type = Object)]
    arguments: Value,
    /// Its jobs' queue.
    queue: Option<String>,
    /// Its jobs' priority.
    priority: Option<i32>,
    /// What it is for.
    description: Option<String>,
    /// Its next tick.
    next_run_at: Option<DateTime<Utc>>,
    /// The latest tick fired.
    last_run_at: Option<DateTime<Utc>>,
    /// That tick's job.
    last_job_id: Option<i64>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use utoipa::PartialSchema;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::Schema;

    use super::*;
    use solidq::{Delivery, ErrorInfo, JobInfo, JobStatus};
    use solidq::{ProcessInfo, QueueStats, RecurringInfo};

    fn properties<T: PartialSchema>() -> BTreeSet<String> {
        match T::schema() {
            RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
            _ => panic!("not an object schema"),
        }
    }

    fn keys(value: impl serde::Serialize) -> BTreeSet<String> {
        serde_json::to_value(value)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn schemas_list_exactly_what_the_library_serializes() {
        let now = Utc::now();
        let error = ErrorInfo {
            kind: "k".into(),
            message: "m".into(),
            backtrace: Some("b".into()),
            attempt: Some(1),
            at: Some(now),
            retry_in_ms: Some(5),
        };
        assert_eq!(keys(&error), properties::<ErrorInfoSchema>());
        let job = JobInfo {
            id: 1,
            kind: "k".into(),
            queue: "q".into(),
            priority: 0,
            arguments: Value::Null,
            status: JobStatus::Ready,
            attempts: 0,
            max_attempts: 1,
            stalled_count: 0,
            delivery: Delivery::AtLeastOnce,
            unique_key: None,
            concurrency_key: None,
            fairness_key: None,
            created_at: now,
            scheduled_at: now,
            started_at: None,
            finished_at: None,
            failed_at: None,
            retry_at: None,
            result: None,
            error: Some(error),
            errors: vec![],
            process_id: None,
            snoozes: 0,
            progress: None,
            checkpoint: None,
            batch_id: None,
        };
        assert_eq!(keys(&job), properties::<JobSchema>());
        let queue = QueueStats {
            name: "q".into(),
            ready: 0,
            scheduled: 0,
            retrying: 0,
            claimed: 0,
            running: 0,
            blocked: 0,
            failed: 0,
            waiting: 0,
            latency: Some(Duration::from_millis(1200)),
            paused: false,
        };
        assert_eq!(serde_json::to_value(&queue).unwrap()["latency"], "1s 200ms");
        assert_eq!(keys(&queue), properties::<QueueSchema>());
        let process = ProcessInfo {
            id: 1,
            kind: "worker".into(),
            name: "w".into(),
            hostname: "h".into(),
            pid: 1,
            supervisor_id: None,
            last_heartbeat_at: now,
            heartbeat_age: Duration::ZERO,
            created_at: now,
            metadata: Value::Null,
            jobs: vec![],
        };
        assert_eq!(keys(&process), properties::<ProcessSchema>());
        let task = RecurringInfo {
            key: "k".into(),
            schedule: "* * * * *".into(),
            timezone: "UTC".into(),
            kind: "k".into(),
            arguments: Value::Null,
            queue: None,
            priority: None,
            description: None,
            next_run_at: None,
            last_run_at: None,
            last_job_id: None,
        };
        assert_eq!(keys(&task), properties::<RecurringSchema>());
    }
}
