//! Fair share across tenants (src/store/fair.rs) on every backend: jobs of
//! different fairness keys ready in one queue are claimed in turns, so one
//! tenant's burst of 50,000 jobs does not hold back another tenant's single
//! job by more than the documented bound (each worker's threads plus its
//! prefetch, plus one); jobs without a key keep their enqueue order; a bad
//! key is refused with the offending value and nothing written.

use crate::common;

use std::time::Duration;

use common::TestDb;
use common::child::Child;
use common::jobs::Ledger;
use common::wait_for;
use solidq::{EnqueueOptions, Error, JobRequest};

backend_tests!(
    keys_take_turns_and_jobs_without_a_key_keep_their_place,
    a_job_whose_run_time_comes_takes_the_front_not_its_id_place,
    a_burst_of_50000_does_not_hold_back_another_tenants_job,
    a_bad_fairness_key_is_refused_and_nothing_is_written,
);

/// A ledger job (`start` and `end` rows around `sleep_ms`) numbered `n`
/// of tenant `key`.
fn job(db: &TestDb, n: i64, key: Option<&str>, sleep_ms: u64) -> JobRequest {
    let job = Ledger {
        url: db.url.clone(),
        n,
        sleep_ms,
    };
    let options = match key {
        Some(key) => EnqueueOptions::new().fairness_key(key),
        None => EnqueueOptions::new(),
    };
    JobRequest::new(&job, options).unwrap()
}

/// The `n` of every start, in ledger order.
fn start_order(db: &TestDb) -> Vec<i64> {
    db.column_of("SELECT n AS v FROM test_ledger WHERE event = 'start' ORDER BY seq")
}

/// One thread, nothing claimed ahead: jobs start in claim order. Tenant a
/// enqueues 30 jobs at once (one statement), then b and c three each, one
/// by one, then a job without a key: b and c take turns with a from the
/// front, and the job without a key waits behind a's burst, as it would
/// without fairness.
fn keys_take_turns_and_jobs_without_a_key_keep_their_place(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let burst: Vec<JobRequest> = (1..=30).map(|n| job(db, n, Some("a"), 0)).collect();
    queue.enqueue_all_with(&burst).unwrap();
    for n in 101..=103 {
        let id = queue.enqueue_all_with(&[job(db, n, Some("b"), 0)]).unwrap()[0];
        assert_eq!(queue.job(id).unwrap().fairness_key.as_deref(), Some("b"));
    }
    for n in 201..=203 {
        queue.enqueue_all_with(&[job(db, n, Some("c"), 0)]).unwrap();
    }
    queue.enqueue_all_with(&[job(db, 0, None, 0)]).unwrap();
    let _worker = Child::worker(
        &db.url,
        &[("SOLIDQ_TEST_THREADS", "1"), ("SOLIDQ_TEST_PREFETCH", "0")],
    );
    wait_for("all 37 jobs", Duration::from_secs(60), || {
        start_order(db).len() == 37
    });
    let mut expected = vec![1, 101, 201, 2, 102, 202, 3, 103, 203];
    expected.extend(4..=30);
    expected.push(0);
    assert_eq!(start_order(db), expected);
    common::assert_invariants(db);
}

/// A job becomes ready through the dispatcher when its run time comes:
/// placed then, at the front (its key has nothing ready), not at its id
/// behind a's burst. One thread, nothing claimed ahead, a's 20 jobs of
/// 100 ms each; b's job due after 300 ms (the standalone worker's
/// dispatcher moves it within about a second) starts before a's
/// fifteenth, where its id would put it last.
fn a_job_whose_run_time_comes_takes_the_front_not_its_id_place(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let burst: Vec<JobRequest> = (1..=20).map(|n| job(db, n, Some("a"), 100)).collect();
    queue.enqueue_all_with(&burst).unwrap();
    let later = Ledger {
        url: db.url.clone(),
        n: 0,
        sleep_ms: 0,
    };
    let options = EnqueueOptions::new()
        .fairness_key("b")
        .delay(Duration::from_millis(300));
    queue
        .enqueue_all_with(&[JobRequest::new(&later, options).unwrap()])
        .unwrap();
    let _worker = Child::worker(
        &db.url,
        &[("SOLIDQ_TEST_THREADS", "1"), ("SOLIDQ_TEST_PREFETCH", "0")],
    );
    wait_for("all 21 jobs", Duration::from_secs(60), || {
        start_order(db).len() == 21
    });
    let order = start_order(db);
    let rank = order.iter().position(|&n| n == 0).unwrap();
    assert!(
        (1..14).contains(&rank),
        "b's job started after {rank} of a's: {order:?}"
    );
    common::assert_invariants(db);
}

/// Tenant a enqueues 50,000 jobs of 2 ms (batches of 1,000); a worker
/// starts on them; then tenant b enqueues one. Between b's enqueue and b's
/// start, at most the bound of a's jobs start (counted in a ledger of every
/// start, from when the enqueue call returned), while most of a's burst is
/// still waiting.
fn a_burst_of_50000_does_not_hold_back_another_tenants_job(db: &TestDb) {
    const THREADS: i64 = 4;
    const PREFETCH: i64 = 16;
    db.create_ledger();
    let queue = db.queue();
    for first in (1..=50_000).step_by(1_000) {
        let chunk: Vec<JobRequest> = (first..first + 1_000)
            .map(|n| job(db, n, Some("tenant-a"), 2))
            .collect();
        queue.enqueue_all_with(&chunk).unwrap();
    }
    let _worker = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_THREADS", &THREADS.to_string()),
            ("SOLIDQ_TEST_PREFETCH", &PREFETCH.to_string()),
        ],
    );
    wait_for("a's jobs to start", Duration::from_secs(60), || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'start'") > 100
    });
    let before = common::now_us();
    let b = queue
        .enqueue_all_with(&[job(db, 0, Some("tenant-b"), 0)])
        .unwrap()[0];
    let enqueued = common::now_us();
    wait_for("b's start", Duration::from_secs(60), || {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM test_ledger WHERE event = 'start' AND job_id = {b}"
        )) == 1
    });
    let b_start = db.scalar(&format!(
        "SELECT at_us AS v FROM test_ledger WHERE event = 'start' AND job_id = {b}"
    ));
    let a_starts = |from: i64| {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM test_ledger
             WHERE event = 'start' AND n > 0 AND at_us > {from} AND at_us < {b_start}"
        ))
    };
    let (after, since_call) = (a_starts(enqueued), a_starts(before));
    let a_started = db.scalar(&format!(
        "SELECT count(*) AS v FROM test_ledger WHERE event = 'start' AND n > 0 AND at_us < {b_start}"
    ));
    eprintln!(
        "{:?}: {after} of a's jobs started between b's enqueue and b's start \
         ({since_call} counting from before the enqueue call, {} µs long); \
         {a_started} of 50,000 had started by then",
        db.backend,
        enqueued - before
    );
    let bound = THREADS + PREFETCH + 1;
    assert!(
        after <= bound,
        "{after} of a's jobs started before b's, over the bound of {bound}"
    );
    assert!(
        a_started < 40_000,
        "b's job started after {a_started} of a's: the burst was nearly done, \
         so this run shows nothing"
    );
}

/// Empty, too long, or with a NUL byte: an error naming the option and the
/// value; no job written.
fn a_bad_fairness_key_is_refused_and_nothing_is_written(db: &TestDb) {
    let queue = db.queue();
    for key in [String::new(), "k".repeat(256), "a\0b".to_string()] {
        let request = job(db, 1, Some(&key), 0);
        match queue.enqueue_all_with(&[request]) {
            Err(Error::InvalidOption { option, value, .. }) => {
                assert_eq!(option, "fairness_key");
                assert_eq!(value, key);
            }
            other => panic!("{key:?}: expected an invalid option, got {other:?}"),
        }
    }
    assert_eq!(db.count("solidq_jobs"), 0);
    assert_eq!(db.count("solidq_ready_executions"), 0);
}
