//! Job options on both backends: retries and backoff, timeouts, delivery,
//! unique keys, result queries, keep_result and cleaning, pause and resume,
//! failed-job retry and discard; options and limits that cannot work
//! refused when the worker starts and at enqueue, naming the value.

use crate::common;

use std::time::Duration;

use common::child::Child;
use common::jobs::{self, CustomBackoff, Echo, Fail, Flaky, Hopeless, Ledger, Sleep};
use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use serde_json::json;
use solidq::{
    Backoff, ConcurrencyLimit, Delivery, EnqueueOptions, Error, FailedFilter, Job, JobContext,
    JobInfo, JobOptions, JobRequest, JobResult, JobStatus, Queue, RateLimit, Worker,
};

backend_tests!(
    failing_twice_then_succeeding_follows_the_backoff,
    last_attempt_fails_with_every_error_kept,
    own_retry_delay_and_no_retry_are_honoured,
    timeout_is_recorded_and_the_retry_never_overlaps_the_first_run,
    at_most_once_timeout_is_not_retried,
    unique_key_holds_across_threads_processes_keep_and_cleaning,
    two_cleaners_at_once_delete_each_expired_job_once,
    job_info_reports_every_status,
    paused_queue_is_skipped_but_accepts_jobs,
    failed_jobs_are_retried_and_discarded_singly_and_in_bulk,
    bulk_enqueue_with_a_taken_unique_key_enqueues_nothing,
    limits_that_cannot_work_are_refused_before_anything_starts,
);

const WAIT: Duration = Duration::from_secs(60);

fn worker(queue: &Queue) -> Worker {
    jobs::worker(queue.clone()).polling_interval(Duration::from_millis(50))
}

fn info(queue: &Queue, id: i64) -> JobInfo {
    queue.job(id).expect("job exists")
}

fn wait_status(queue: &Queue, id: i64, status: JobStatus) -> JobInfo {
    wait_for(&format!("job {id} to be {status}"), WAIT, || {
        info(queue, id).status == status
    });
    info(queue, id)
}

/// Ledger `start` times of `job`'s attempts, in µs, oldest first.
fn attempt_starts(db: &TestDb, job: i64) -> Vec<i64> {
    db.conn().column(&format!(
        "SELECT at_us AS v FROM test_ledger WHERE job_id = {job} AND event = 'start' ORDER BY seq"
    ))
}

fn failing_twice_then_succeeding_follows_the_backoff(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let backoff = Backoff::exponential(Duration::from_millis(400), Duration::from_secs(10));
    let id = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 2,
            },
            EnqueueOptions::new().max_attempts(3).backoff(backoff),
        )
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    // Catch each retry while it waits: its stored retry_at must be the
    // failure time plus the backoff for that attempt.
    let mut retry_ats = Vec::new();
    for attempt in 1..=2u32 {
        wait_for(&format!("retry {attempt}"), WAIT, || {
            let i = info(&queue, id);
            i.status == JobStatus::Retrying && i.attempts == attempt
        });
        let i = info(&queue, id);
        let error = i.errors.last().unwrap();
        assert_eq!(error.kind, "flaky");
        let expected = backoff.delay(attempt, 0.5);
        assert_eq!(error.retry_in_ms, Some(expected.as_millis() as u64));
        let waited = (i.retry_at.unwrap() - error.at.unwrap()).to_std().unwrap();
        assert!(
            waited >= expected - Duration::from_millis(5)
                && waited < expected + Duration::from_millis(250),
            "attempt {attempt}: retry_at is {waited:?} after the failure, backoff {expected:?}"
        );
        retry_ats.push(i.retry_at.unwrap());
    }
    let done = wait_status(&queue, id, JobStatus::Succeeded);
    worker.stop().unwrap();
    assert_eq!(done.attempts, 3);
    assert_eq!(done.result, Some(json!({ "attempt": 3 })));
    assert_eq!(done.errors.len(), 2);
    let starts = attempt_starts(db, id);
    assert_eq!(starts.len(), 3);
    for (retry_at, start) in retry_ats.iter().zip(&starts[1..]) {
        assert!(
            *start >= retry_at.timestamp_micros() - 5_000,
            "a retry started before its retry_at"
        );
    }
}

fn last_attempt_fails_with_every_error_kept(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 5,
            },
            EnqueueOptions::new()
                .max_attempts(2)
                .backoff(Backoff::fixed(Duration::from_millis(50))),
        )
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    let failed = wait_status(&queue, id, JobStatus::Failed);
    worker.stop().unwrap();
    assert_eq!(failed.attempts, 2);
    let messages: Vec<&str> = failed.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages, ["attempt 1 failed", "attempt 2 failed"]);
    assert_eq!(failed.error.unwrap().message, "attempt 2 failed");
    assert_eq!(failed.retry_at, None);
}

fn own_retry_delay_and_no_retry_are_honoured(db: &TestDb) {
    let queue = db.queue();
    let custom = queue.enqueue(&CustomBackoff).unwrap();
    let hopeless = queue.enqueue(&Hopeless).unwrap();
    let worker = worker(&queue).start().unwrap();
    let custom = wait_status(&queue, custom, JobStatus::Failed);
    let hopeless = wait_status(&queue, hopeless, JobStatus::Failed);
    worker.stop().unwrap();
    let delays: Vec<Option<u64>> = custom.errors.iter().map(|e| e.retry_in_ms).collect();
    assert_eq!(
        delays,
        [Some(150), Some(300), None],
        "the type's retry_delay decides"
    );
    assert_eq!(
        hopeless.attempts, 1,
        "no_retry fails at once despite max_attempts 5"
    );
    assert_eq!(hopeless.error.unwrap().kind, "invalid_input");
}

fn timeout_is_recorded_and_the_retry_never_overlaps_the_first_run(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = queue
        .enqueue_with(
            &Ledger {
                url: db.url.clone(),
                n: 1,
                sleep_ms: 1200,
            },
            EnqueueOptions::new()
                .timeout(Duration::from_millis(300))
                .max_attempts(2)
                .backoff(Backoff::fixed(Duration::ZERO)),
        )
        .unwrap();
    // Two workers compete for it: the retry is ready the moment the first
    // run has returned, and only then.
    let first = worker(&queue).threads(2).start().unwrap();
    let second = worker(&queue).threads(2).start().unwrap();
    let failed = wait_status(&queue, id, JobStatus::Failed);
    first.stop().unwrap();
    second.stop().unwrap();

    assert_eq!(failed.attempts, 2);
    for error in &failed.errors {
        assert_eq!(error.kind, "timeout");
        assert!(
            error.message.contains("past its timeout of 0.300s"),
            "{}",
            error.message
        );
    }
    let mut conn = db.conn();
    let events: Vec<i64> = conn.column(&format!(
        "SELECT {} AS v FROM test_ledger WHERE job_id = {id} ORDER BY at_us, seq",
        db.bigint("CASE WHEN event = 'start' THEN 1 ELSE 0 END")
    ));
    assert_eq!(
        events,
        [1, 0, 1, 0],
        "start, end, start, end: the runs never overlap"
    );
}

fn at_most_once_timeout_is_not_retried(db: &TestDb) {
    let queue = db.queue();
    let id = queue
        .enqueue_with(
            &Sleep { ms: 400 },
            EnqueueOptions::new()
                .timeout(Duration::from_millis(100))
                .max_attempts(3)
                .delivery(Delivery::AtMostOnce),
        )
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    let failed = wait_status(&queue, id, JobStatus::Failed);
    worker.stop().unwrap();
    assert_eq!(
        (failed.attempts, failed.delivery),
        (1, Delivery::AtMostOnce)
    );
    assert_eq!(failed.error.unwrap().kind, "timeout");
}

fn unique_key_holds_across_threads_processes_keep_and_cleaning(db: &TestDb) {
    let queue = db.queue();
    let key = "order-42";
    let options = || {
        EnqueueOptions::new()
            .unique_key(key)
            .keep_result(Duration::from_secs(3))
    };
    let children: Vec<Child> = (0..2).map(|_| Child::enqueuer(&db.url, key, 20)).collect();
    let outcomes: Vec<Result<i64, solidq::Error>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let queue = queue.clone();
                s.spawn(move || {
                    (0..20)
                        .map(|_| queue.enqueue_with(&Echo { value: json!(key) }, options()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    let mut children = children;
    for child in &mut children {
        let status = child.wait_timeout(WAIT).expect("enqueuer finished");
        assert!(status.success(), "{}", child.logs());
    }
    let mut new_ids: Vec<i64> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect();
    let mut existing: Vec<i64> = Vec::new();
    for outcome in &outcomes {
        match outcome {
            Ok(_) => {}
            Err(solidq::Error::Duplicate {
                unique_key,
                existing_id,
            }) => {
                assert_eq!(unique_key, key);
                existing.push(*existing_id);
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    for child in &children {
        for line in child.logs().lines() {
            match line.split_once(' ') {
                Some(("new", id)) => new_ids.push(id.parse().unwrap()),
                Some(("existing", id)) => existing.push(id.parse().unwrap()),
                _ => {}
            }
        }
    }
    assert_eq!(new_ids.len(), 1, "exactly one enqueue won: {new_ids:?}");
    assert_eq!(existing.len(), 8 * 20 + 2 * 20 - 1);
    assert!(
        existing.iter().all(|id| *id == new_ids[0]),
        "every loser names the winner"
    );
    assert_eq!(db.count("solidq_jobs"), 1);

    // Finished and kept: still a duplicate.
    let running = worker(&queue).start().unwrap();
    let id = new_ids[0];
    wait_status(&queue, id, JobStatus::Succeeded);
    running.stop().unwrap();
    let again = queue.enqueue_with(&Echo { value: json!(key) }, options());
    assert!(
        matches!(again, Err(solidq::Error::Duplicate { existing_id, .. }) if existing_id == id)
    );
    assert_eq!(queue.job_by_unique_key(key).unwrap().id, id);
    // Cleaned once its keep_result has passed: the key is free.
    assert_eq!(
        queue.clear_finished(None).unwrap(),
        0,
        "still within keep_result"
    );
    wait_for("keep_result to pass", WAIT, || {
        queue.clear_finished(None).unwrap() == 1
    });
    assert!(matches!(queue.job(id), Err(solidq::Error::JobNotFound(_))));
    let fresh = queue
        .enqueue_or_existing(&Echo { value: json!(key) }, options())
        .unwrap();
    assert!(fresh.is_new() && fresh.id() != id);
}

fn job_info_reports_every_status(db: &TestDb) {
    let queue = db.queue();
    let scheduled = queue
        .enqueue_with(
            &Echo { value: json!(1) },
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let ready = queue
        .enqueue_with(
            &Echo { value: json!(2) },
            EnqueueOptions::new().queue("idle"),
        )
        .unwrap();
    let running = queue.enqueue(&Sleep { ms: 1500 }).unwrap();
    let succeeded = queue
        .enqueue(&Echo {
            value: json!("done"),
        })
        .unwrap();
    let failed = queue
        .enqueue(&Fail {
            message: "no".into(),
        })
        .unwrap();
    let retrying = queue
        .enqueue_with(
            &Fail {
                message: "later".into(),
            },
            EnqueueOptions::new()
                .max_attempts(2)
                .backoff(Backoff::fixed(Duration::from_secs(3600))),
        )
        .unwrap();
    assert_eq!(info(&queue, scheduled).status, JobStatus::Scheduled);
    assert_eq!(info(&queue, ready).status, JobStatus::Ready);

    let worker = worker(&queue)
        .queues(["default"])
        .threads(4)
        .start()
        .unwrap();
    let running_info = wait_status(&queue, running, JobStatus::Running);
    assert_eq!(running_info.process_id, worker.process_id());
    let s = wait_status(&queue, succeeded, JobStatus::Succeeded);
    assert_eq!((s.result, s.attempts), (Some(json!("done")), 1));
    let f = wait_status(&queue, failed, JobStatus::Failed);
    assert_eq!(f.error.unwrap().message, "no");
    let r = wait_status(&queue, retrying, JobStatus::Retrying);
    let retry_at = r.retry_at.expect("a retrying job reports retry_at");
    assert!(retry_at > chrono::Utc::now() + chrono::Duration::minutes(59));
    assert_eq!(
        (r.attempts, r.error.unwrap().message.as_str()),
        (1, "later")
    );
    wait_status(&queue, running, JobStatus::Succeeded);
    worker.stop().unwrap();

    let sch = info(&queue, scheduled);
    assert_eq!((sch.status, sch.retry_at), (JobStatus::Scheduled, None));
    assert!(sch.scheduled_at > sch.created_at + chrono::Duration::minutes(59));
    assert_eq!(
        info(&queue, ready).status,
        JobStatus::Ready,
        "its queue had no worker"
    );
    assert!(matches!(
        queue.job(i64::MAX),
        Err(solidq::Error::JobNotFound(_))
    ));
}

fn paused_queue_is_skipped_but_accepts_jobs(db: &TestDb) {
    let queue = db.queue();
    assert!(queue.pause("slow").unwrap());
    assert!(
        !queue.pause("slow").unwrap(),
        "pausing twice changes nothing"
    );
    let slow = queue
        .enqueue_with(
            &Echo { value: json!("s") },
            EnqueueOptions::new().queue("slow"),
        )
        .unwrap();
    let fast = queue
        .enqueue_with(
            &Echo { value: json!("f") },
            EnqueueOptions::new().queue("fast"),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let stats = queue.queue_stats("slow").unwrap();
    assert!(stats.paused);
    assert_eq!(stats.ready, 1);
    assert!(
        stats.latency.unwrap() >= Duration::from_millis(20),
        "{:?}",
        stats.latency
    );

    let worker = worker(&queue).queues(["*"]).start().unwrap();
    wait_status(&queue, fast, JobStatus::Succeeded);
    // The worker has claimed everything it could see; the paused job waits.
    let later = queue
        .enqueue_with(
            &Echo { value: json!("l") },
            EnqueueOptions::new().queue("fast"),
        )
        .unwrap();
    wait_status(&queue, later, JobStatus::Succeeded);
    assert_eq!(info(&queue, slow).status, JobStatus::Ready);
    assert!(queue.resume("slow").unwrap());
    wait_status(&queue, slow, JobStatus::Succeeded);
    worker.stop().unwrap();
    // Drained queues stay listed (their jobs finished), with nothing in
    // any state.
    let queues = queue.queues().unwrap();
    let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["fast", "slow"], "drained queues are listed");
    assert!(
        queues
            .iter()
            .all(|q| q.ready + q.running + q.claimed + q.failed == 0 && !q.paused),
        "{queues:?}"
    );
}

fn failed_jobs_are_retried_and_discarded_singly_and_in_bulk(db: &TestDb) {
    let queue = db.queue();
    let on = |q: &str, n: usize| -> Vec<i64> {
        (0..n)
            .map(|i| {
                queue
                    .enqueue_with(
                        &Fail {
                            message: format!("{q}-{i}"),
                        },
                        EnqueueOptions::new().queue(q),
                    )
                    .unwrap()
            })
            .collect()
    };
    let a = on("a", 3);
    let b = on("b", 2);
    let bulk: Vec<Fail> = (0..2_500)
        .map(|i| Fail {
            message: format!("bulk-{i}"),
        })
        .collect();
    queue.enqueue_all(&bulk).unwrap();
    let first = worker(&queue).threads(8).start().unwrap();
    wait_for("every job to fail", WAIT, || {
        db.count("solidq_failed_executions") == 2_505
    });
    first.stop().unwrap();

    // One at a time.
    assert_eq!(queue.retry_failed(&FailedFilter::ids([a[0]])).unwrap(), 1);
    assert_eq!(info(&queue, a[0]).status, JobStatus::Ready);
    assert_eq!(queue.discard_failed(&FailedFilter::ids([a[1]])).unwrap(), 1);
    assert!(matches!(
        queue.job(a[1]),
        Err(solidq::Error::JobNotFound(_))
    ));
    assert_eq!(
        queue.retry_failed(&FailedFilter::ids([a[1]])).unwrap(),
        0,
        "gone jobs are ignored"
    );
    // Filtered.
    assert_eq!(
        queue.retry_failed(&FailedFilter::all().queue("b")).unwrap(),
        2
    );
    assert_eq!(
        queue
            .discard_failed(&FailedFilter::all().kind("fail").queue("a"))
            .unwrap(),
        1
    );
    // Everything left, in batches.
    assert_eq!(queue.retry_failed(&FailedFilter::all()).unwrap(), 2_500);
    assert_eq!(db.count("solidq_failed_executions"), 0);
    assert_eq!(db.count("solidq_ready_executions"), 2_503);

    // A retried job that had used its attempt gets exactly one more.
    let second = worker(&queue).threads(8).start().unwrap();
    wait_for("the retried jobs to fail again", WAIT, || {
        db.count("solidq_failed_executions") == 2_503
    });
    second.stop().unwrap();
    let again = info(&queue, b[0]);
    assert_eq!(
        (again.attempts, again.max_attempts, again.errors.len()),
        (2, 2, 2)
    );
    assert_eq!(
        queue
            .discard_failed(&FailedFilter::all().kind("fail"))
            .unwrap(),
        2_503
    );
    assert_eq!(db.count("solidq_jobs"), 0);
    common::assert_invariants(db);
}

/// `enqueue_all_with` is all or nothing: one taken unique key among many
/// jobs enqueues none of them (the ones inserted before it are rolled
/// back) and names the key and its holder; without it, all go in.
fn bulk_enqueue_with_a_taken_unique_key_enqueues_nothing(db: &TestDb) {
    let queue = db.queue();
    let echo = |n: i64| Echo { value: json!(n) };
    let holder = queue
        .enqueue_with(&echo(0), EnqueueOptions::new().unique_key("taken"))
        .unwrap();
    let request = |n: i64, key: &str| {
        JobRequest::new(&echo(n), EnqueueOptions::new().unique_key(key)).unwrap()
    };
    let batch = [
        request(1, "free-1"),
        request(2, "free-2"),
        request(3, "taken"),
        request(4, "free-4"),
    ];
    match queue.enqueue_all_with(&batch) {
        Err(solidq::Error::Duplicate {
            unique_key,
            existing_id,
        }) => {
            assert_eq!(unique_key, "taken");
            assert_eq!(existing_id, holder);
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    assert_eq!(db.count("solidq_jobs"), 1, "nothing of the batch was kept");
    assert!(queue.job_by_unique_key("free-1").is_err());

    let ids = queue
        .enqueue_all_with(&[request(5, "free-1"), request(6, "free-2")])
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(queue.job_by_unique_key("free-2").unwrap().id, ids[1]);
    assert_eq!(db.count("solidq_jobs"), 3);
}

/// A job type whose options come from `LIMITS[N]`.
#[derive(Serialize, Deserialize)]
struct Limited<const N: usize>;

const LIMITS: [fn() -> JobOptions; 4] = [
    || JobOptions::new().concurrency(ConcurrencyLimit::new(0)),
    || JobOptions::new().rate_limit(RateLimit::new(0, Duration::from_secs(1))),
    || JobOptions::new().rate_limit(RateLimit::new(5, Duration::ZERO)),
    || JobOptions::new().max_attempts(0),
];

impl<const N: usize> Job for Limited<N> {
    const KIND: &'static str = ["limit_zero", "rate_zero", "period_zero", "attempts_zero"][N];
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        LIMITS[N]()
    }
}

fn invalid(error: Error) -> (String, String, String) {
    match error {
        Error::InvalidOption {
            option,
            value,
            reason,
        } => (option.to_string(), value, reason),
        other => panic!("expected InvalidOption, got {other}"),
    }
}

/// `Worker::start` with `J` registered: refused with `option` and `value`
/// named, and the kind; nothing registered in the database.
fn refused_at_start<J: Job>(db: &TestDb, option: &str, value: &str) {
    let error = worker(&db.queue()).register::<J>().start().err();
    let (o, v, reason) = invalid(error.unwrap_or_else(|| panic!("{} started", J::KIND)));
    assert_eq!((o.as_str(), v.as_str()), (option, value), "{reason}");
    assert!(
        reason.contains(&format!("job kind {:?}", J::KIND)),
        "{reason}"
    );
}

fn limits_that_cannot_work_are_refused_before_anything_starts(db: &TestDb) {
    let queue = db.queue();
    refused_at_start::<Limited<0>>(db, "concurrency limit", "0");
    refused_at_start::<Limited<1>>(db, "rate limit", "0");
    refused_at_start::<Limited<2>>(db, "rate limit period", "0ns");
    refused_at_start::<Limited<3>>(db, "max_attempts", "0");
    let error = worker(&queue)
        .threads(0)
        .start()
        .err()
        .expect("threads(0) started");
    let (option, value, _) = invalid(error);
    assert_eq!((option.as_str(), value.as_str()), ("threads", "0"));
    assert_eq!(db.count("solidq_processes"), 0, "no worker registered");
    // The same values refused at enqueue, nothing written.
    for (error, option, value) in [
        (
            queue.enqueue(&Limited::<0>).unwrap_err(),
            "concurrency limit",
            "0",
        ),
        (queue.enqueue(&Limited::<1>).unwrap_err(), "rate limit", "0"),
        (
            queue.enqueue(&Limited::<2>).unwrap_err(),
            "rate limit period",
            "0ns",
        ),
        (
            queue.enqueue(&Limited::<3>).unwrap_err(),
            "max_attempts",
            "0",
        ),
    ] {
        let (o, v, reason) = invalid(error);
        assert_eq!((o.as_str(), v.as_str()), (option, value), "{reason}");
    }
    assert_eq!(db.count("solidq_jobs"), 0, "nothing enqueued");
    // Checked before they are used, on their own too.
    assert!(ConcurrencyLimit::new(1).validate().is_ok());
    assert!(
        RateLimit::new(10, Duration::from_secs(1))
            .validate()
            .is_ok()
    );
    assert!(JobOptions::new().queue("no spaces").validate().is_err());
}

/// Two cleaners at once (two supervisors' maintenance rounds) delete each
/// expired job once between them, with no error, and nothing else: on
/// MySQL each batch is one `DELETE … ORDER BY expires_at LIMIT`, and the
/// second cleaner waits for the first's rows instead of skipping them.
fn two_cleaners_at_once_delete_each_expired_job_once(db: &TestDb) {
    const JOBS: usize = 6_000;
    const KEPT: usize = 100;
    let queue = db.queue();
    let ids = queue
        .enqueue_all(
            &(0..JOBS)
                .map(|_| Echo { value: json!(1) })
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let first_kept = ids[JOBS - KEPT];
    // Finished and expired at once, all but the last KEPT (not ready any
    // more: their ready rows go too).
    db.execute(&format!(
        "DELETE FROM solidq_ready_executions WHERE job_id < {first_kept}"
    ));
    db.execute(&format!(
        "UPDATE solidq_jobs SET finished_at = CURRENT_TIMESTAMP, expires_at = CURRENT_TIMESTAMP
         WHERE id < {first_kept}"
    ));
    let deleted: Vec<u64> = std::thread::scope(|s| {
        let cleaners: Vec<_> = (0..2)
            .map(|_| s.spawn(|| queue.clear_finished(None).expect("clear_finished")))
            .collect();
        cleaners
            .into_iter()
            .map(|c| c.join().expect("cleaner"))
            .collect()
    });
    assert_eq!(
        deleted.iter().sum::<u64>(),
        (JOBS - KEPT) as u64,
        "each expired job deleted once between them: {deleted:?}"
    );
    assert_eq!(db.count("solidq_jobs"), KEPT as i64, "the rest kept");
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_jobs WHERE id < {first_kept}"
        )),
        0
    );
}
