//! Job control: an operator cancels waiting jobs (discarded with the reason,
//! their concurrency slot given back), runs scheduled or blocked jobs now,
//! and cancels running jobs, which see it through `ctx.is_cancelled()`
//! within a second and are recorded as discarded, never retried.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{
    Backoff, ConcurrencyLimit, EnqueueOptions, Error, Job, JobContext, JobError, JobFilter,
    JobOptions, JobResult, JobStatus, Queue, Worker, WorkerConfig,
};

backend_tests!(
    cancelling_waiting_jobs_discards_them_with_the_reason_and_gives_their_slot_back,
    run_now_moves_scheduled_and_blocked_jobs_to_ready,
    a_job_asked_to_stop_is_discarded_when_claimed_again_without_running,
);

// It measures a time: with nothing else running (MySQL took 1.7 s beside
// the suite's eight tests at a time).
backend_tests!(alone: a_cancelled_running_job_sees_it_within_a_second_and_is_discarded_not_retried);

#[derive(Serialize, Deserialize)]
struct Noop;

impl Job for Noop {
    const KIND: &'static str = "noop";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

/// One at a time.
#[derive(Serialize, Deserialize)]
struct Single {
    n: u32,
}

impl Job for Single {
    const KIND: &'static str = "single";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(self.n))
    }
    fn options() -> JobOptions {
        JobOptions::new().concurrency(ConcurrencyLimit::new(1).duration(Duration::from_secs(600)))
    }
}

/// Fails; its retry is an hour away.
#[derive(Serialize, Deserialize)]
struct Later;

impl Job for Later {
    const KIND: &'static str = "later";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::msg("not yet"))
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(5)
            .backoff(Backoff::fixed(Duration::from_secs(3600)))
    }
}

/// Runs until cancelled; then hands itself back (which a cancellation
/// overrides), or, with `finish`, succeeds anyway.
#[derive(Serialize, Deserialize)]
struct LongRun {
    finish: bool,
    /// Ends with its own error naming this row, rather than handing
    /// itself back.
    #[serde(default)]
    row: Option<u32>,
}

impl Job for LongRun {
    const KIND: &'static str = "long_run";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ctx.set_progress("running");
        let until = Instant::now() + Duration::from_secs(30);
        while !ctx.is_cancelled() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.finish {
            return Ok(serde_json::json!({ "operator": ctx.is_cancelled_by_operator() }));
        }
        if let Some(row) = self.row {
            return Err(JobError::new("cancelled", format!("stopped at row {row}")));
        }
        Err(JobError::interrupted())
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(3)
    }
}

/// Must never run.
#[derive(Serialize, Deserialize)]
struct Forbidden;

impl Job for Forbidden {
    const KIND: &'static str = "forbidden";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        panic!("a job asked to stop ran again");
    }
}

fn worker(queue: &Queue) -> Worker {
    Worker::new(queue.clone())
        .config(WorkerConfig {
            threads: 2,
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .register::<Noop>()
        .register::<Single>()
        .register::<Later>()
        .register::<LongRun>()
        .register::<Forbidden>()
}

fn cancelling_waiting_jobs_discards_them_with_the_reason_and_gives_their_slot_back(db: &TestDb) {
    let queue = db.queue();
    let retrying = queue.enqueue(&Later).unwrap();
    worker(&queue).drain_ready().unwrap();
    assert_eq!(queue.job(retrying).unwrap().status, JobStatus::Retrying);
    let ready = queue.enqueue(&Noop).unwrap();
    let scheduled = queue
        .enqueue_with(
            &Noop,
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let holder = queue.enqueue(&Single { n: 1 }).unwrap();
    let blocked = queue.enqueue(&Single { n: 2 }).unwrap();
    let waiter = queue.enqueue(&Single { n: 3 }).unwrap();
    assert_eq!(queue.job(holder).unwrap().status, JobStatus::Ready);
    assert_eq!(queue.job(blocked).unwrap().status, JobStatus::Blocked);

    for id in [ready, scheduled, retrying, blocked] {
        let done = queue.cancel_job(id, "customer asked").unwrap();
        assert_eq!((done.discarded, done.stopping), (1, 0), "job {id}");
        let info = queue.job(id).unwrap();
        assert_eq!(info.status, JobStatus::Discarded, "job {id}");
        let error = info.error.unwrap();
        assert!(
            error.message.contains("customer asked"),
            "{}",
            error.message
        );
    }
    // The ready holder of the slot: cancelling it gives the slot to the
    // next blocked job of its key.
    queue.cancel_job(holder, "wrong order").unwrap();
    assert_eq!(queue.job(waiter).unwrap().status, JobStatus::Ready);
    // Finished jobs are left alone; a missing one is an error.
    let again = queue.cancel_job(ready, "twice").unwrap();
    assert_eq!((again.discarded, again.untouched), (0, 1));
    assert!(matches!(
        queue.cancel_job(999_999, "x"),
        Err(Error::JobNotFound(_))
    ));
    // By filter: every waiting noop.
    let noops: Vec<i64> = (0..5).map(|_| queue.enqueue(&Noop).unwrap()).collect();
    let done = queue
        .cancel_jobs(
            &JobFilter::new()
                .kind("noop")
                .status(JobStatus::Ready)
                .limit(1000),
            "bulk",
        )
        .unwrap();
    assert_eq!(done.discarded, 5);
    for id in noops {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Discarded);
    }
    common::assert_invariants(db);
}

fn run_now_moves_scheduled_and_blocked_jobs_to_ready(db: &TestDb) {
    let queue = db.queue();
    let scheduled = queue
        .enqueue_with(
            &Noop,
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let holder = queue.enqueue(&Single { n: 1 }).unwrap();
    let blocked = queue.enqueue(&Single { n: 2 }).unwrap();
    assert!(queue.run_job_now(scheduled).unwrap());
    assert_eq!(queue.job(scheduled).unwrap().status, JobStatus::Ready);
    assert!(queue.run_job_now(blocked).unwrap());
    let info = queue.job(blocked).unwrap();
    assert_eq!(
        info.status,
        JobStatus::Ready,
        "out of its limit, ready at once"
    );
    assert_eq!(info.concurrency_key, None);
    assert!(
        !queue.run_job_now(holder).unwrap(),
        "a ready job has nothing to run now"
    );
    let later: Vec<i64> = (0..3)
        .map(|_| {
            queue
                .enqueue_with(
                    &Noop,
                    EnqueueOptions::new().delay(Duration::from_secs(3600)),
                )
                .unwrap()
        })
        .collect();
    let moved = queue
        .run_jobs_now(
            &JobFilter::new()
                .kind("noop")
                .status(JobStatus::Scheduled)
                .limit(1000),
        )
        .unwrap();
    assert_eq!(moved, 3);
    let drained = worker(&queue).drain_ready().unwrap();
    assert_eq!(drained.succeeded, 6, "{drained:?}");
    for id in later {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Succeeded);
    }
    common::assert_invariants(db);
}

fn a_cancelled_running_job_sees_it_within_a_second_and_is_discarded_not_retried(db: &TestDb) {
    let queue = db.queue();
    let stopped = queue
        .enqueue(&LongRun {
            finish: false,
            row: None,
        })
        .unwrap();
    let at_row = queue
        .enqueue(&LongRun {
            finish: false,
            row: Some(38),
        })
        .unwrap();
    let finished = queue
        .enqueue(&LongRun {
            finish: true,
            row: None,
        })
        .unwrap();
    // A thread for each of the three jobs.
    let worker = worker(&queue).threads(3).start().unwrap();
    // Their code runs (claimed for a thread is not enough: a job asked to
    // stop before its thread takes it is discarded without running).
    for id in [stopped, at_row, finished] {
        wait_for("the job's code to run", Duration::from_secs(10), || {
            queue.job(id).unwrap().progress == Some(serde_json::json!("running"))
        });
    }
    let asked = Instant::now();
    let done = queue
        .cancel_jobs(
            &JobFilter::new().kind("long_run").limit(100),
            "deploy gone wrong",
        )
        .unwrap();
    assert_eq!((done.stopping, done.discarded), (3, 0));
    wait_for("the jobs to end", Duration::from_secs(10), || {
        [stopped, at_row, finished].iter().all(|id| {
            matches!(
                queue.job(*id).unwrap().status,
                JobStatus::Discarded | JobStatus::Succeeded
            )
        })
    });
    let took = asked.elapsed();
    eprintln!("cancelled running jobs ended {took:?} after the request");
    worker.stop().unwrap();
    assert!(
        took < Duration::from_millis(1500),
        "seen within a second (plus the outcome write): {took:?}"
    );
    let info = queue.job(stopped).unwrap();
    assert_eq!(
        info.status,
        JobStatus::Discarded,
        "not retried, not handed back"
    );
    assert_eq!(info.snoozes, 0);
    assert!(
        info.error
            .as_ref()
            .unwrap()
            .message
            .contains("cancelled by an operator")
    );
    // An attempt that started counts, whatever ended it; its start is kept.
    assert_eq!(info.attempts, 1, "{info:?}");
    let error = info.error.as_ref().unwrap();
    assert_eq!(error.attempt, Some(1), "{error:?}");
    let started = info.started_at.expect("started_at kept");
    assert!(started <= info.finished_at.unwrap(), "{info:?}");
    // The job's own error is kept beside the operator's reason.
    let info = queue.job(at_row).unwrap();
    assert_eq!(info.status, JobStatus::Discarded);
    assert_eq!(info.attempts, 1, "{info:?}");
    let message = &info.error.as_ref().unwrap().message;
    assert!(
        message.contains("cancelled by an operator while it ran")
            && message.contains("cancelled: stopped at row 38"),
        "{message}"
    );
    let (code, out, err) = common::run_cli(db, &["job", &at_row.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("stopped at row 38"), "{out}");
    assert!(
        !out.lines()
            .any(|l| l.starts_with("started") && l.trim_end().ends_with('-')),
        "the start is shown: {out}"
    );
    let info = queue.job(finished).unwrap();
    assert_eq!(
        info.status,
        JobStatus::Succeeded,
        "it finished its work anyway"
    );
    assert_eq!(info.result, Some(serde_json::json!({ "operator": true })));
}

fn a_job_asked_to_stop_is_discarded_when_claimed_again_without_running(db: &TestDb) {
    let queue = db.queue();
    let id = queue.enqueue(&Forbidden).unwrap();
    // As a dead worker's release leaves it: ready, with the request.
    db.execute(&format!(
        "UPDATE solidq_jobs SET cancel_requested_at = CURRENT_TIMESTAMP WHERE id = {id}"
    ));
    let drained = worker(&queue).drain().unwrap();
    assert_eq!(drained.cancelled, 1, "{drained:?}");
    let worker = worker(&queue).start().unwrap();
    let second = queue
        .enqueue_with(
            &Forbidden,
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    db.execute(&format!(
        "UPDATE solidq_jobs SET cancel_requested_at = CURRENT_TIMESTAMP WHERE id = {second}"
    ));
    assert!(queue.run_job_now(second).unwrap());
    wait_for(
        "the second to be discarded",
        Duration::from_secs(10),
        || queue.job(second).unwrap().status == JobStatus::Discarded,
    );
    worker.stop().unwrap();
    assert_eq!(queue.job(id).unwrap().status, JobStatus::Discarded);
}
