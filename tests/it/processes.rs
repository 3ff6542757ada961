//! Real worker processes on one database: exactly-once under contention,
//! and graceful shutdown on SIGTERM.

use crate::common;

use std::time::{Duration, Instant};

use common::child::Child;
use common::jobs::Ledger;
use common::{TestDb, wait_for};
use solidq::JobStatus;

backend_tests!(
    four_worker_processes_run_five_thousand_jobs_exactly_once,
    sigterm_finishes_short_jobs_and_releases_long_ones,
    sigterm_fails_running_at_most_once_jobs_instead_of_releasing_them,
);

fn ledger_count(db: &TestDb, event: &str) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM test_ledger WHERE event = '{event}'"
    ))
}

fn four_worker_processes_run_five_thousand_jobs_exactly_once(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let jobs: Vec<Ledger> = (0..5_000)
        .map(|n| Ledger {
            url: db.url.clone(),
            n,
            sleep_ms: 0,
        })
        .collect();
    queue.enqueue_all(&jobs).unwrap();

    let mut workers: Vec<Child> = (0..4)
        .map(|_| Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "4")]))
        .collect();
    wait_for("5,000 ledger ends", Duration::from_secs(240), || {
        ledger_count(db, "end") == 5_000
    });
    for w in &workers {
        w.signal(libc::SIGTERM);
    }
    for w in &mut workers {
        let status = w
            .wait_timeout(Duration::from_secs(20))
            .expect("worker exits after SIGTERM");
        assert!(status.success(), "worker exit {status:?}: {}", w.logs());
    }

    let mut conn = db.conn();
    let per_job = conn.column(
        "SELECT count(*) AS v FROM test_ledger WHERE event = 'start' GROUP BY job_id HAVING count(*) <> 1",
    );
    assert!(
        per_job.is_empty(),
        "jobs started more than once: {per_job:?}"
    );
    assert_eq!(
        conn.scalar("SELECT count(DISTINCT job_id) AS v FROM test_ledger"),
        5_000
    );
    assert_eq!(
        conn.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL"),
        5_000,
        "every job finished"
    );
    let pids = conn.scalar("SELECT count(DISTINCT pid) AS v FROM test_ledger");
    assert!(
        pids >= 2,
        "work was shared between processes ({pids} did it all)"
    );
    for table in [
        "solidq_ready_executions",
        "solidq_claimed_executions",
        "solidq_processes",
    ] {
        assert_eq!(db.count(table), 0, "{table} is empty");
    }
    common::assert_invariants(db);
}

fn sigterm_finishes_short_jobs_and_releases_long_ones(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let long = queue
        .enqueue(&Ledger {
            url: db.url.clone(),
            n: 1,
            sleep_ms: 60_000,
        })
        .unwrap();
    let short = queue
        .enqueue(&Ledger {
            url: db.url.clone(),
            n: 2,
            sleep_ms: 700,
        })
        .unwrap();
    let shutdown = Duration::from_millis(2500);
    let mut worker = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_THREADS", "2"),
            ("SOLIDQ_TEST_SHUTDOWN_MS", "2500"),
        ],
    );
    wait_for("both jobs to start", Duration::from_secs(30), || {
        ledger_count(db, "start") == 2
    });
    assert_eq!(db.count("solidq_processes"), 1);

    let signalled = Instant::now();
    worker.signal(libc::SIGTERM);
    let status = worker
        .wait_timeout(shutdown + Duration::from_secs(5))
        .unwrap_or_else(|| panic!("worker did not exit in time: {}", worker.logs()));
    let took = signalled.elapsed();
    assert!(status.success(), "exit {status:?}: {}", worker.logs());
    assert!(
        took >= shutdown - Duration::from_millis(100),
        "waited the grace period ({took:?})"
    );
    assert!(
        took < shutdown + Duration::from_secs(3),
        "exited soon after it ({took:?})"
    );

    let short_info = queue.job(short).unwrap();
    assert_eq!(
        short_info.status,
        JobStatus::Succeeded,
        "the short job finished"
    );
    let long_info = queue.job(long).unwrap();
    assert_eq!(
        long_info.status,
        JobStatus::Ready,
        "the long job is back in ready"
    );
    assert_eq!(
        (long_info.attempts, long_info.stalled_count),
        (0, 0),
        "not counted as a stall"
    );
    assert_eq!(db.count("solidq_processes"), 0, "the process row is gone");
    assert_eq!(db.count("solidq_claimed_executions"), 0);
}

fn sigterm_fails_running_at_most_once_jobs_instead_of_releasing_them(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let long = |n| Ledger {
        url: db.url.clone(),
        n,
        sleep_ms: 60_000,
    };
    let at_least_once = queue.enqueue(&long(1)).unwrap();
    let at_most_once = queue
        .enqueue_with(
            &long(2),
            solidq::EnqueueOptions::new().delivery(solidq::Delivery::AtMostOnce),
        )
        .unwrap();
    let mut worker = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_THREADS", "2"),
            ("SOLIDQ_TEST_SHUTDOWN_MS", "1000"),
        ],
    );
    wait_for("both jobs to start", Duration::from_secs(30), || {
        ledger_count(db, "start") == 2
    });
    worker.signal(libc::SIGTERM);
    let status = worker
        .wait_timeout(Duration::from_secs(10))
        .expect("worker exits");
    assert!(status.success(), "{}", worker.logs());

    let released = queue.job(at_least_once).unwrap();
    assert_eq!(released.status, JobStatus::Ready);
    let failed = queue.job(at_most_once).unwrap();
    assert_eq!(
        failed.status,
        JobStatus::Failed,
        "an at-most-once job is not started again"
    );
    let error = failed.error.unwrap();
    assert_eq!(error.kind, "shutdown");
    assert!(
        error.message.contains("at_most_once delivery, not retried"),
        "{}",
        error.message
    );
}
