//! The test helpers users get (`solidq::testing`, `Worker::drain`): jobs
//! run in the test's own thread until none is left, what was enqueued can
//! be asserted by arguments, and a throwaway SQLite file comes and goes
//! with the test.

use crate::common;

use std::time::{Duration, Instant};

use common::TestDb;
use serde::{Deserialize, Serialize};
use solidq::testing::{
    TestQueue, assert_enqueued, assert_enqueued_matching, assert_not_enqueued, enqueued,
};
use solidq::{
    Backoff, EnqueueOptions, Job, JobContext, JobError, JobOptions, JobResult, JobStatus, Queue,
    Worker,
};

backend_tests!(
    drain_runs_every_ready_job_and_what_they_enqueue_in_the_calling_thread,
    drain_runs_scheduled_jobs_as_they_fall_due_and_drain_ready_leaves_them,
    assert_enqueued_finds_a_job_by_its_arguments_and_names_what_waits_on_a_miss,
);

/// Enqueues one `Child` per item, through the queue given as state.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Order {
    id: u32,
    items: u32,
}

impl Job for Order {
    const KIND: &'static str = "order";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let queue = ctx.state::<Queue>()?;
        for n in 0..self.items {
            queue.enqueue(&Ship {
                order: self.id,
                item: n,
            })?;
        }
        Ok(serde_json::json!(format!(
            "{:?}",
            std::thread::current().id()
        )))
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Ship {
    order: u32,
    item: u32,
}

impl Job for Ship {
    const KIND: &'static str = "ship";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(format!(
            "{:?}",
            std::thread::current().id()
        )))
    }
}

/// Fails every attempt; retried at once.
#[derive(Serialize, Deserialize)]
struct Flop;

impl Job for Flop {
    const KIND: &'static str = "flop";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::msg("flop"))
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(3)
            .backoff(Backoff::fixed(Duration::ZERO).with_jitter(0.0))
    }
}

fn worker(queue: &Queue) -> Worker {
    Worker::new(queue.clone())
        .state(queue.clone())
        .register::<Order>()
        .register::<Ship>()
        .register::<Flop>()
}

fn drain_runs_every_ready_job_and_what_they_enqueue_in_the_calling_thread(db: &TestDb) {
    let test = TestQueue::connect(&db.url).unwrap();
    let queue = test.queue();
    let orders: Vec<i64> = (1..=3)
        .map(|id| queue.enqueue(&Order { id, items: id }).unwrap())
        .collect();
    let started = Instant::now();
    let drained = worker(queue).drain().unwrap();
    eprintln!(
        "drained {} jobs in {:?}",
        drained.total(),
        started.elapsed()
    );
    assert_eq!(
        drained.succeeded,
        3 + 6,
        "3 orders and the 6 shipments they enqueued"
    );
    assert_eq!(drained.total(), 9);
    let here = format!("{:?}", std::thread::current().id());
    for id in orders {
        let info = queue.job(id).unwrap();
        assert_eq!(info.status, JobStatus::Succeeded);
        assert_eq!(
            info.result,
            Some(serde_json::json!(here)),
            "ran in the test's thread"
        );
    }
    assert_not_enqueued::<Ship>(queue);
    assert_eq!(
        worker(queue).drain().unwrap(),
        solidq::Drained::default(),
        "nothing left"
    );
    common::assert_invariants(db);
}

fn drain_runs_scheduled_jobs_as_they_fall_due_and_drain_ready_leaves_them(db: &TestDb) {
    let test = TestQueue::connect(&db.url).unwrap();
    let queue = test.queue();
    let flop = queue.enqueue(&Flop).unwrap();
    let later = queue
        .enqueue_with(
            &Ship { order: 9, item: 9 },
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let drained = worker(queue).drain_ready().unwrap();
    assert_eq!((drained.retried, drained.failed), (1, 0));
    assert_eq!(queue.job(flop).unwrap().status, JobStatus::Retrying);
    // The retries fall due at once (backoff 0) and run to the last attempt.
    let drained = worker(queue).drain().unwrap();
    assert_eq!((drained.retried, drained.failed), (1, 1), "{drained:?}");
    let info = queue.job(flop).unwrap();
    assert_eq!((info.status, info.attempts), (JobStatus::Failed, 3));
    assert_eq!(
        queue.job(later).unwrap().status,
        JobStatus::Scheduled,
        "a job due in an hour is not run"
    );
}

fn assert_enqueued_finds_a_job_by_its_arguments_and_names_what_waits_on_a_miss(db: &TestDb) {
    let test = TestQueue::connect(&db.url).unwrap();
    let queue = test.queue();
    queue.enqueue(&Ship { order: 1, item: 0 }).unwrap();
    let second = queue.enqueue(&Ship { order: 2, item: 5 }).unwrap();
    assert_eq!(
        assert_enqueued(queue, &Ship { order: 2, item: 5 }).id,
        second
    );
    assert_eq!(
        assert_enqueued_matching::<Ship>(queue, serde_json::json!({ "item": 5 })).id,
        second
    );
    let listed: Vec<Ship> = enqueued::<Ship>(queue)
        .unwrap()
        .into_iter()
        .map(|(_, job)| job)
        .collect();
    assert_eq!(
        listed,
        [Ship { order: 1, item: 0 }, Ship { order: 2, item: 5 }]
    );
    let miss = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_enqueued(queue, &Ship { order: 3, item: 0 })
    }))
    .expect_err("no such job: the assertion fails");
    let message = miss.downcast_ref::<String>().unwrap();
    assert!(
        message.contains(r#"{"item":0,"order":3}"#)
            && message.contains("2 of that kind wait")
            && message.contains(r#"{"item":5,"order":2}"#),
        "{message}"
    );
    assert_not_enqueued::<Order>(queue);
    let present = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_not_enqueued::<Ship>(queue)
    }));
    assert!(present.is_err(), "two ships wait");
}

#[test]
fn a_test_queue_is_a_fresh_sqlite_file_removed_at_drop() {
    let started = Instant::now();
    let test = TestQueue::new().unwrap();
    assert_eq!(test.queue().backend(), solidq::Backend::Sqlite);
    let path = test
        .queue()
        .url()
        .expose()
        .strip_prefix("sqlite://")
        .unwrap()
        .to_string();
    assert!(std::path::Path::new(&path).exists());
    test.queue().enqueue(&Ship { order: 1, item: 1 }).unwrap();
    let drained = worker(test.queue()).drain().unwrap();
    assert_eq!(drained.succeeded, 1);
    eprintln!("new test queue, enqueue, drain: {:?}", started.elapsed());
    let other = TestQueue::new().unwrap();
    assert_not_enqueued::<Ship>(other.queue());
    drop(test);
    assert!(!std::path::Path::new(&path).exists(), "deleted at drop");
}
