//! Concurrency limits, on both backends, with real worker processes: limit
//! 1 never overlaps, limit 3 never exceeds 3, discard discards, blocked jobs
//! show as blocked, and a holder killed mid-run frees its slot after the
//! limit's duration while the supervisor's release rules still apply.

use crate::common;

use std::time::Duration;

use common::child::{Child, child_command};
use common::jobs::{LimitedBrief, LimitedDiscard, LimitedOne, LimitedThree};
use common::{TestDb, wait_for};
use solidq::{EnqueueOptions, Enqueued, FailedFilter, JobRequest, JobStatus, Queue};

backend_tests!(
    limit_one_never_overlaps_across_four_processes,
    limit_three_never_runs_more_than_three,
    discard_mode_discards_what_finds_the_slot_taken,
    blocked_jobs_wait_and_run_in_priority_order,
    failed_holders_give_their_slot_back_and_retried_ones_take_one_again,
);

/// Tests that time a duration, run with no other test beside them.
mod timed {
    use super::*;

    backend_tests!(alone: a_killed_holder_frees_its_slot_after_the_duration);
}

/// (start, end) of every ledgered run, in microseconds; panics unless every
/// job ran exactly once.
fn runs(db: &TestDb, jobs: usize) -> Vec<(i64, i64)> {
    let mut conn = db.conn();
    let starts =
        conn.column("SELECT at_us AS v FROM test_ledger WHERE event = 'start' ORDER BY job_id");
    let ends =
        conn.column("SELECT at_us AS v FROM test_ledger WHERE event = 'end' ORDER BY job_id");
    let distinct = db.scalar("SELECT count(DISTINCT job_id) AS v FROM test_ledger");
    assert_eq!(
        (starts.len(), ends.len(), distinct),
        (jobs, jobs, jobs as i64),
        "every job ran exactly once"
    );
    starts.into_iter().zip(ends).collect()
}

/// The most runs that were going on at one instant.
fn max_concurrent(runs: &[(i64, i64)]) -> usize {
    // Ends sort before starts at the same instant: touching is not overlap.
    let mut events: Vec<(i64, i32)> = runs
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

fn workers(db: &TestDb, n: usize) -> Vec<Child> {
    (0..n)
        .map(|_| Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "4")]))
        .collect()
}

fn wait_all_finished(queue: &Queue, ids: &[i64], timeout: Duration) {
    wait_for("every job to finish", timeout, || {
        ids.iter().all(|id| {
            queue
                .job(*id)
                .is_ok_and(|j| j.status == JobStatus::Succeeded)
        })
    });
}

fn stop_all(children: Vec<Child>) {
    for mut child in children {
        child.signal(libc::SIGTERM);
        child.wait_timeout(Duration::from_secs(30));
    }
}

/// The semaphore of `key` is back to `limit` free slots, and nobody waits.
fn assert_slots_all_free(db: &TestDb, key: &str, limit: i64) {
    let value = db.scalar(&format!(
        "SELECT {} AS v FROM solidq_semaphores WHERE {} = '{key}'",
        db.bigint("value"),
        db.quote("key")
    ));
    assert_eq!(value, limit, "every slot of {key} given back");
    assert_eq!(db.count("solidq_blocked_executions"), 0);
    common::assert_invariants(db);
}

fn limit_one_never_overlaps_across_four_processes(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // The chain alternates between two queues, each served by two
    // processes: the next job is never on the finishing process's queues,
    // so each one is claimed by another process, and the two serving its
    // queue contest the slot (both claim on every notification:
    // `wake_all`). With one queue for all, the process that freed the
    // slot may take the next job itself every time (it holds the duty and
    // never fills up; on SQLite it claims in the transaction that writes
    // the finish), and the chain would stay in one process.
    let requests: Vec<JobRequest> = (0..200)
        .map(|n| {
            let job = LimitedOne {
                url: db.url.clone(),
                n,
                sleep_ms: 5,
                key: "account-7".into(),
            };
            let side = if n % 2 == 0 { "even" } else { "odd" };
            JobRequest::new(&job, EnqueueOptions::new().queue(side)).unwrap()
        })
        .collect();
    let ids: Vec<i64> = queue
        .enqueue_batch(&requests)
        .unwrap()
        .into_iter()
        .map(Enqueued::id)
        .collect();
    assert_eq!(db.count("solidq_blocked_executions"), 199);
    let children: Vec<Child> = ["even", "even", "odd", "odd"]
        .into_iter()
        .map(|side| {
            Child::worker(
                &db.url,
                &[
                    ("SOLIDQ_TEST_THREADS", "4"),
                    ("SOLIDQ_TEST_WAKE_ALL", "true"),
                    ("SOLIDQ_TEST_QUEUES", side),
                ],
            )
        })
        .collect();
    wait_all_finished(&queue, &ids, Duration::from_secs(120));
    stop_all(children);

    let runs = runs(db, 200);
    assert_eq!(max_concurrent(&runs), 1, "limit 1: no two runs overlap");
    let pids = db.scalar("SELECT count(DISTINCT pid) AS v FROM test_ledger");
    assert!(pids >= 2, "the jobs were spread over processes ({pids})");
    assert_slots_all_free(db, "limited_one/account-7", 1);
}

fn limit_three_never_runs_more_than_three(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let jobs: Vec<LimitedThree> = (0..90)
        .map(|n| LimitedThree {
            url: db.url.clone(),
            n,
            sleep_ms: 30,
            key: "k".into(),
        })
        .collect();
    let ids = queue.enqueue_all(&jobs).unwrap();
    let children = workers(db, 4);
    wait_all_finished(&queue, &ids, Duration::from_secs(120));
    stop_all(children);

    let most = max_concurrent(&runs(db, 90));
    assert!(most <= 3, "limit 3, yet {most} ran at once");
    assert!(most >= 2, "16 threads and 90 jobs never ran two at once");
    assert_slots_all_free(db, "limited_three/k", 3);
}

fn discard_mode_discards_what_finds_the_slot_taken(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let job = |n, sleep_ms| LimitedDiscard {
        url: db.url.clone(),
        n,
        sleep_ms,
        key: "report".into(),
    };
    let first = queue.enqueue(&job(0, 1_500)).unwrap();
    let other_key = queue
        .enqueue(&LimitedDiscard {
            key: "other".into(),
            ..job(9, 0)
        })
        .unwrap();
    let late: Vec<i64> = (1..=3)
        .map(|n| queue.enqueue(&job(n, 0)).unwrap())
        .collect();
    for id in &late {
        let info = queue.job(*id).unwrap();
        assert_eq!(info.status, JobStatus::Discarded, "{info:?}");
        assert!(info.finished_at.is_some());
        let error = info.error.expect("the reason is recorded");
        assert_eq!(error.kind, "discarded");
        assert!(error.message.contains("report"), "{}", error.message);
    }
    assert_eq!(queue.job(first).unwrap().status, JobStatus::Ready);

    let children = workers(db, 1);
    wait_all_finished(&queue, &[first, other_key], Duration::from_secs(60));
    // The slot is free again: the next one runs.
    let again = queue.enqueue(&job(4, 0)).unwrap();
    wait_all_finished(&queue, &[again], Duration::from_secs(60));
    stop_all(children);
    let ran = db.column_of("SELECT DISTINCT n AS v FROM test_ledger ORDER BY n");
    assert_eq!(ran, [0, 4, 9], "discarded jobs never ran");
    assert_slots_all_free(db, "limited_discard/report", 1);
}

fn blocked_jobs_wait_and_run_in_priority_order(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let job = |n, sleep_ms| LimitedOne {
        url: db.url.clone(),
        n,
        sleep_ms,
        key: "door".into(),
    };
    let holder = queue.enqueue(&job(0, 300)).unwrap();
    // Enqueued in this order, with these priorities: 2 runs before 1.
    let low = queue
        .enqueue_with(&job(1, 0), solidq::EnqueueOptions::new().priority(5))
        .unwrap();
    let high = queue
        .enqueue_with(&job(2, 0), solidq::EnqueueOptions::new().priority(-5))
        .unwrap();
    let delayed = queue
        .enqueue_with(
            &job(3, 0),
            solidq::EnqueueOptions::new().delay(Duration::from_millis(200)),
        )
        .unwrap();
    for id in [low, high] {
        let info = queue.job(id).unwrap();
        assert_eq!(info.status, JobStatus::Blocked, "{info:?}");
        assert_eq!(info.concurrency_key.as_deref(), Some("limited_one/door"));
    }
    assert_eq!(queue.job(delayed).unwrap().status, JobStatus::Scheduled);

    let children = workers(db, 1);
    wait_all_finished(
        &queue,
        &[holder, low, high, delayed],
        Duration::from_secs(60),
    );
    stop_all(children);
    let runs = runs(db, 4);
    assert_eq!(max_concurrent(&runs), 1);
    let order = db.column_of("SELECT n AS v FROM test_ledger WHERE event = 'start' ORDER BY seq");
    assert_eq!(order[0], 0, "the holder ran first: {order:?}");
    let (pos_high, pos_low) = (
        order.iter().position(|&n| n == 2).unwrap(),
        order.iter().position(|&n| n == 1).unwrap(),
    );
    assert!(pos_high < pos_low, "priority -5 before 5: {order:?}");
    assert_slots_all_free(db, "limited_one/door", 1);
}

fn a_killed_holder_frees_its_slot_after_the_duration(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let job = |n, sleep_ms| LimitedBrief {
        url: db.url.clone(),
        n,
        sleep_ms,
        key: "vault".into(),
    };
    // A standalone worker whose death nobody notices before its heartbeat
    // is 6 s old; the limit's duration is 2 s.
    let holder_worker = Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "1")]);
    let holder = queue.enqueue(&job(0, 60_000)).unwrap();
    wait_for("the holder to start", Duration::from_secs(30), || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE n = 0") == 1
    });
    let waiting = queue.enqueue(&job(1, 0)).unwrap();
    assert_eq!(queue.job(waiting).unwrap().status, JobStatus::Blocked);
    holder_worker.signal(libc::SIGKILL);

    let supervisor = Child::supervisor(&format!(
        r#"
database_url = "{url}"
heartbeat_interval = "200ms"
process_alive_threshold = "6s"
max_stalled_count = 1

[dispatcher]
polling_interval = "100ms"
concurrency_maintenance_interval = "200ms"

[[workers]]
command = {command:?}
threads = 2
polling_interval = "50ms"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
        url = db.url,
        command = child_command(),
    ));
    wait_all_finished(&queue, &[holder, waiting], Duration::from_secs(60));

    let start_of = |n: i64, nth: i64| {
        db.scalar(&format!(
            "SELECT at_us AS v FROM test_ledger WHERE n = {n} AND event = 'start' ORDER BY seq LIMIT 1 OFFSET {nth}"
        ))
    };
    let (held_at, waiter_at, rerun_at) = (start_of(0, 0), start_of(1, 0), start_of(0, 1));
    assert!(
        waiter_at - held_at >= 1_500_000,
        "the slot was freed {} ms after the holder started, before the 2 s duration",
        (waiter_at - held_at) / 1000
    );
    assert!(
        waiter_at < rerun_at,
        "the waiter ran when the slot expired, before the dead holder was pruned"
    );
    let info = queue.job(holder).unwrap();
    assert_eq!(
        (info.stalled_count, info.attempts),
        (1, 1),
        "the dead holder's job was released once by the stall rules, then succeeded"
    );
    let logs = {
        let mut supervisor = supervisor;
        supervisor.signal(libc::SIGTERM);
        supervisor.wait_timeout(Duration::from_secs(30));
        supervisor.logs()
    };
    assert!(logs.contains("concurrency sweep"), "{logs}");
    assert_eq!(db.count("solidq_blocked_executions"), 0);
    common::assert_invariants(db);
}

fn failed_holders_give_their_slot_back_and_retried_ones_take_one_again(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let job = |n, sleep_ms| LimitedOne {
        url: db.url.clone(),
        n,
        sleep_ms,
        key: "gate".into(),
    };
    let failing = queue.enqueue(&job(-1, 0)).unwrap();
    let next = queue.enqueue(&job(1, 200)).unwrap();
    assert_eq!(queue.job(next).unwrap().status, JobStatus::Blocked);
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    wait_all_finished(&queue, &[next], Duration::from_secs(30));
    assert_eq!(queue.job(failing).unwrap().status, JobStatus::Failed);

    // Retried by an operator, it takes the slot again before running.
    let blocker = queue.enqueue(&job(2, 3_000)).unwrap();
    wait_for("the blocker to start", Duration::from_secs(30), || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE n = 2") == 1
    });
    assert_eq!(
        queue.retry_failed(&FailedFilter::ids([failing])).unwrap(),
        1
    );
    wait_for(
        "the retried job to wait for the slot",
        Duration::from_secs(30),
        || queue.job(failing).unwrap().status == JobStatus::Blocked,
    );
    wait_all_finished(&queue, &[blocker, failing], Duration::from_secs(30));
    worker.stop().unwrap();
    assert_eq!(max_concurrent(&runs_of(db)), 1);
    assert_slots_all_free(db, "limited_one/gate", 1);
}

/// (start, end) of every ledgered run, jobs that ran twice included.
fn runs_of(db: &TestDb) -> Vec<(i64, i64)> {
    let mut conn = db.conn();
    let starts =
        conn.column("SELECT at_us AS v FROM test_ledger WHERE event = 'start' ORDER BY seq");
    let ends = conn.column("SELECT at_us AS v FROM test_ledger WHERE event = 'end' ORDER BY seq");
    assert_eq!(starts.len(), ends.len());
    starts.into_iter().zip(ends).collect()
}
