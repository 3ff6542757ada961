//! Exactly-once effects (`JobContext::complete_in_transaction`): a job's
//! writes to solidq's database commit with its success in one
//! transaction, on every backend. Each `tx_ledger` job writes a `tx` row
//! to `test_ledger` that way, so the row is there exactly when the job
//! is recorded succeeded: through a worker, `Worker::drain`, a workflow,
//! a refusal, a moved claim, an operator's cancel, a process frozen in
//! its transaction and pruned, and SIGKILL every 300 ms.

use crate::common;

use std::time::{Duration, Instant};

use common::child::{Child, kill_one_every_300ms};
use common::jobs::{Echo, TxLedger};
use common::recorder::Recorder;
use common::{TestDb, assert_invariants, wait_for};
use serde_json::json;
use solidq::{BatchOptions, EnqueueOptions, JobRequest, JobStatus, Queue};

backend_tests!(
    writes_and_success_commit_together,
    a_refusal_rolls_the_writes_back_and_the_job_is_retried,
    a_panic_rolls_the_writes_back_and_leaves_no_transaction_open,
    a_claim_moved_away_rolls_back_and_records_nothing,
    a_cancelled_job_rolls_its_writes_back_and_is_discarded,
    a_workflow_member_ends_once_and_releases_its_dependant,
    a_worker_frozen_in_its_transaction_and_pruned_rolls_back_when_thawed,
);

backend_tests!(exclusive: every_effect_lands_exactly_once_under_sigkill_every_300ms,);

const WAIT: Duration = Duration::from_secs(30);

/// `tx` rows of job `id`.
fn effects(db: &TestDb, id: i64) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM test_ledger WHERE job_id = {id} AND event = 'tx'"
    ))
}

fn enqueue(queue: &Queue, job: &TxLedger) -> i64 {
    queue
        .enqueue_with(job, EnqueueOptions::new().max_stalled_count(1_000))
        .unwrap()
}

fn writes_and_success_commit_together(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = enqueue(
        &queue,
        &TxLedger {
            n: 7,
            ..TxLedger::default()
        },
    );
    let drained = common::jobs::worker(queue.clone()).drain().unwrap();
    assert_eq!(drained.succeeded, 1);
    assert_eq!(effects(db, id), 1);
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Succeeded);
    assert_eq!(info.result, Some(json!({ "n": 7 })));
    assert_eq!(info.attempts, 1, "one attempt, recorded by the transaction");
    assert!(info.started_at.is_some() && info.finished_at.is_some());
    // And through a worker's threads. The completer sees each success as
    // already written: it writes nothing (the claim is gone: a write would
    // be fenced out, reported by nobody) and reports it, once.
    let ids: Vec<i64> = (0..20)
        .map(|n| {
            enqueue(
                &queue,
                &TxLedger {
                    n,
                    ..TxLedger::default()
                },
            )
        })
        .collect();
    let heard = Recorder::default();
    let worker = common::jobs::worker(queue.clone())
        .threads(4)
        .events(heard.clone())
        .start()
        .unwrap();
    wait_for("every job to succeed", WAIT, || {
        ids.iter()
            .all(|&id| queue.job(id).unwrap().status == JobStatus::Succeeded)
    });
    worker.stop().unwrap();
    for &id in &ids {
        assert_eq!(effects(db, id), 1, "job {id}");
        assert_eq!(queue.job(id).unwrap().attempts, 1, "job {id}");
        // (A claim ahead may be handed back unstarted and claimed again:
        // `released`, not an end of the job.)
        let ended: Vec<&str> = heard
            .names_of_job(id)
            .into_iter()
            .filter(|n| !["claimed", "released"].contains(n))
            .collect();
        assert_eq!(ended, ["succeeded"], "job {id}: one end, reported once");
    }
    assert_invariants(db);
}

fn a_refusal_rolls_the_writes_back_and_the_job_is_retried(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = enqueue(
        &queue,
        &TxLedger {
            refuse_first: true,
            ..TxLedger::default()
        },
    );
    let worker = common::jobs::worker(queue.clone());
    let drained = worker.drain_ready().unwrap();
    assert_eq!((drained.succeeded, drained.retried), (0, 1));
    assert_eq!(effects(db, id), 0, "the refused run's row rolled back");
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Retrying, "retried by its options");
    assert_eq!(
        info.error.as_ref().map(|e| e.kind.as_str()),
        Some("refused")
    );
    // The retry, run now, commits once.
    queue.run_job_now(id).unwrap();
    assert_eq!(worker.drain_ready().unwrap().succeeded, 1);
    assert_eq!(effects(db, id), 1);
    let info = queue.job(id).unwrap();
    assert_eq!((info.status, info.attempts), (JobStatus::Succeeded, 2));
    assert_invariants(db);
}

fn a_panic_rolls_the_writes_back_and_leaves_no_transaction_open(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = enqueue(
        &queue,
        &TxLedger {
            panic_first: true,
            ..TxLedger::default()
        },
    );
    let worker = common::jobs::worker(queue.clone());
    assert_eq!(worker.drain_ready().unwrap().retried, 1);
    assert_eq!(effects(db, id), 0, "the panicking run's row rolled back");
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Retrying);
    assert_eq!(info.error.as_ref().map(|e| e.kind.as_str()), Some("panic"));
    // The pooled connection went back rolled back: no session of this
    // database is left inside a transaction (on SQLite one would hold the
    // write lock, and the run below could not commit).
    let open = match db.backend {
        solidq::Backend::Postgres => db.scalar(&format!(
            "SELECT count(*) AS v FROM pg_stat_activity
             WHERE state LIKE 'idle in transaction%' AND application_name = '{}'",
            db.url.rsplit("application_name=").next().unwrap()
        )),
        solidq::Backend::Mysql => db.scalar(
            "SELECT count(*) AS v FROM information_schema.innodb_trx t
             JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
             WHERE p.db = DATABASE() AND p.id <> CONNECTION_ID()",
        ),
        _ => 0,
    };
    assert_eq!(open, 0, "transactions left open by the panic");
    queue.run_job_now(id).unwrap();
    assert_eq!(worker.drain_ready().unwrap().succeeded, 1);
    assert_eq!(effects(db, id), 1);
    assert_invariants(db);
}

fn a_claim_moved_away_rolls_back_and_records_nothing(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = enqueue(
        &queue,
        &TxLedger {
            move_claim: Some(db.url.clone()),
            ..TxLedger::default()
        },
    );
    let drained = common::jobs::worker(queue.clone()).drain_ready().unwrap();
    assert_eq!(drained.succeeded, 0);
    assert_eq!(
        effects(db, id),
        0,
        "the fenced completion rolled the row back"
    );
    let info = queue.job(id).unwrap();
    assert_eq!(
        (info.status, info.error.is_none()),
        (JobStatus::Running, true),
        "nothing recorded over the claim that replaced this one"
    );
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_claimed_executions WHERE job_id = {id} AND process_id > 1000000"
        )),
        1,
        "the other claim stands"
    );
}

fn a_cancelled_job_rolls_its_writes_back_and_is_discarded(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let id = enqueue(
        &queue,
        &TxLedger {
            wait_for_cancel: true,
            ..TxLedger::default()
        },
    );
    let worker = common::jobs::worker(queue.clone())
        .threads(1)
        .start()
        .unwrap();
    wait_for("the job to run", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Running
    });
    queue.cancel_job(id, "changed my mind").unwrap();
    wait_for("the job to end", WAIT, || {
        queue.job(id).unwrap().finished_at.is_some()
    });
    worker.stop().unwrap();
    assert_eq!(effects(db, id), 0);
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Discarded);
    let message = info.error.map(|e| e.message).unwrap_or_default();
    assert!(message.contains("cancelled by an operator"), "{message}");
    assert_invariants(db);
}

fn a_workflow_member_ends_once_and_releases_its_dependant(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let parent = JobRequest::new(
        &TxLedger {
            n: 1,
            ..TxLedger::default()
        },
        EnqueueOptions::new(),
    )
    .unwrap()
    .named("parent");
    let child = JobRequest::new(&Echo { value: json!(2) }, EnqueueOptions::new())
        .unwrap()
        .named("child")
        .after("parent");
    let made = queue.batch(BatchOptions::new(), &[parent, child]).unwrap();
    let [parent, child] = made.jobs[..] else {
        panic!("{:?}", made.jobs)
    };
    // Drain: the parent's transaction releases the child, which runs next.
    let drained = common::jobs::worker(queue.clone()).drain().unwrap();
    assert_eq!(drained.succeeded, 2);
    assert_eq!(effects(db, parent), 1);
    assert_eq!(queue.job(child).unwrap().status, JobStatus::Succeeded);
    let info = queue.batch_info(made.id).unwrap().unwrap();
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (2, 0, 2, 0),
        "each member's end counted once"
    );
    assert!(info.is_finished());
    assert_invariants(db);
}

/// A worker frozen (SIGSTOP) inside its transaction, after its writes,
/// is pruned; a peer runs the job again and commits; thawed, the frozen
/// one's completion finds its claim gone and rolls its writes back.
/// On SQLite a process in a write transaction holds the database's write
/// lock, so nothing can prune it while it is frozen there: thawed, it
/// commits, once, and the peer never runs the job.
fn a_worker_frozen_in_its_transaction_and_pruned_rolls_back_when_thawed(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("in-transaction");
    let id = enqueue(
        &queue,
        &TxLedger {
            marker: Some(marker.display().to_string()),
            sleep_ms: 3_000,
            ..TxLedger::default()
        },
    );
    let settings = [
        ("SOLIDQ_TEST_THREADS", "1"),
        ("SOLIDQ_TEST_ALIVE_MS", "1000"),
        ("SOLIDQ_TEST_HEARTBEAT_MS", "100"),
    ];
    let frozen = Child::worker(&db.url, &settings);
    wait_for("the job's transaction to write", WAIT, || marker.exists());
    frozen.signal(libc::SIGSTOP);
    let peer = Child::worker(&db.url, &settings);
    if db.backend == solidq::Backend::Sqlite {
        // The frozen writer holds the lock: nothing moves until it thaws.
        std::thread::sleep(Duration::from_millis(1_500));
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Running);
    } else {
        wait_for("the peer to run the job again and commit", WAIT, || {
            queue.job(id).unwrap().status == JobStatus::Succeeded
        });
        assert_eq!(effects(db, id), 1, "the peer's run committed");
    }
    frozen.signal(libc::SIGCONT);
    wait_for("the job to succeed", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    // The thawed transaction ends (rolled back, or on SQLite committed)
    // within its sleep; then the ledger holds its last word.
    let settled = Instant::now() + Duration::from_secs(5);
    wait_for("the frozen worker's transaction to end", WAIT, || {
        Instant::now() > settled || frozen.logs().contains("claim_lost")
    });
    let rows = effects(db, id);
    let info = queue.job(id).unwrap();
    drop(peer);
    drop(frozen);
    assert_eq!(rows, 1, "the job's row exactly once");
    assert_eq!(info.status, JobStatus::Succeeded);
    if db.backend != solidq::Backend::Sqlite {
        assert_eq!(info.stalled_count, 1, "the second run was after the prune");
    }
    assert_invariants(db);
}

fn every_effect_lands_exactly_once_under_sigkill_every_300ms(db: &TestDb) {
    const JOBS: i64 = 10_000;
    db.create_ledger();
    let queue = db.queue();
    let requests: Vec<JobRequest> = (0..JOBS)
        .map(|n| {
            JobRequest::new(
                &TxLedger {
                    n,
                    ..TxLedger::default()
                },
                EnqueueOptions::new().max_stalled_count(1_000),
            )
            .unwrap()
        })
        .collect();
    for chunk in requests.chunks(1_000) {
        queue.enqueue_batch(chunk).unwrap();
    }
    let settings = [
        ("SOLIDQ_TEST_THREADS", "4"),
        ("SOLIDQ_TEST_ALIVE_MS", "1000"),
        ("SOLIDQ_TEST_HEARTBEAT_MS", "100"),
    ];
    let (workers, kills) =
        kill_one_every_300ms(&db.url, &settings, Duration::from_secs(15), || false);
    wait_for("every job to succeed", Duration::from_secs(240), || {
        db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL") == JOBS
    });
    drop(workers);
    let succeeded = db.scalar(
        "SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM solidq_failed_executions f WHERE f.job_id = solidq_jobs.id)",
    );
    let rows = db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'tx'");
    let jobs_with_rows =
        db.scalar("SELECT count(DISTINCT job_id) AS v FROM test_ledger WHERE event = 'tx'");
    let stalled = db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE stalled_count > 0");
    eprintln!(
        "{}: {kills} kills, {stalled} jobs released from killed workers and run again, {rows} ledger rows for {jobs_with_rows} jobs",
        db.backend
    );
    assert!(kills >= 30, "{kills} kills");
    assert!(stalled > 0, "the chaos should have cut some jobs short");
    assert_eq!(succeeded, JOBS, "every job succeeded");
    assert_eq!(jobs_with_rows, JOBS, "no job's row missing");
    assert_eq!(rows, JOBS, "no job's row twice");
    assert_invariants(db);
}
