//! A panic in user code (DESIGN: "caught, logged, the process carries on"):
//! event hooks that panic at every call, and a job type whose own
//! `retry_delay` panics, stop neither the worker's poller nor its
//! completer: every job still runs and every outcome is recorded.

use crate::common;

use std::time::Duration;

use common::jobs::{self, Echo};
use common::{TestDb, assert_invariants, wait_for};
use serde::{Deserialize, Serialize};
use solidq::events::{Events, JobClaimed, JobFailed, JobRetried, JobSucceeded};
use solidq::{
    Backoff, ErrorInfo, Job, JobContext, JobError, JobOptions, JobResult, JobStatus, WorkerConfig,
};

backend_tests!(a_panicking_hook_or_retry_delay_never_stops_the_worker);

/// Panics in every hook a worker calls.
struct PanickingHooks;

impl Events for PanickingHooks {
    fn job_claimed(&self, _: &JobClaimed) {
        panic!("hook panics on claimed");
    }
    fn job_succeeded(&self, _: &JobSucceeded) {
        panic!("hook panics on succeeded");
    }
    fn job_retried(&self, _: &JobRetried) {
        panic!("hook panics on retried");
    }
    fn job_failed(&self, _: &JobFailed) {
        panic!("hook panics on failed");
    }
}

/// Always fails; its `retry_delay` panics.
#[derive(Serialize, Deserialize)]
struct PanickyBackoff;

impl Job for PanickyBackoff {
    const KIND: &'static str = "panicky_backoff";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::msg("fails"))
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(2)
            .backoff(Backoff::fixed(Duration::from_millis(100)))
    }
    fn retry_delay(_attempt: u32, _error: &ErrorInfo, _policy: &Backoff) -> Duration {
        panic!("retry_delay panics")
    }
}

fn a_panicking_hook_or_retry_delay_never_stops_the_worker(db: &TestDb) {
    let queue = db.queue();
    let echoes: Vec<i64> = (0..20)
        .map(|n| queue.enqueue(&Echo { value: n.into() }).unwrap())
        .collect();
    let failing = queue.enqueue(&PanickyBackoff).unwrap();
    let worker = jobs::worker(queue.clone())
        .register::<PanickyBackoff>()
        .config(WorkerConfig {
            threads: 2,
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .events(PanickingHooks)
        .start()
        .unwrap();
    wait_for(
        "every job to end despite the panics",
        Duration::from_secs(30),
        || {
            echoes
                .iter()
                .all(|id| queue.job(*id).unwrap().status == JobStatus::Succeeded)
                && queue.job(failing).unwrap().status == JobStatus::Failed
        },
    );
    // The panicking retry_delay was replaced by the type's backoff policy:
    // the job was retried once, then failed for good.
    let info = queue.job(failing).unwrap();
    assert_eq!(info.attempts, 2);
    assert_eq!(info.errors.len(), 2);
    assert_eq!(info.errors[0].retry_in_ms, Some(100));
    // And the worker still works.
    let late = queue
        .enqueue(&Echo {
            value: "late".into(),
        })
        .unwrap();
    wait_for("a job enqueued afterwards", Duration::from_secs(10), || {
        queue.job(late).unwrap().status == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    assert_invariants(db);
}
