//! A worker frozen past the alive threshold (DESIGN: "pruned after the
//! threshold; its late outcomes write nothing; it starts none of the jobs
//! it had claimed ahead"). A worker holding jobs claimed ahead is stopped
//! with SIGSTOP; a standalone peer prunes it and runs those jobs; after
//! SIGCONT the frozen worker starts none of them (its lease lapsed and its
//! row is gone), records nothing over the peer's claims, and registers
//! again. Jobs claimed ahead are reported `claimed` until they start.

use crate::common;

use std::time::Duration;

use common::child::Child;
use common::jobs::{Echo, FileLedger, Sleep, file_ledger_starts};
use common::{TestDb, assert_invariants, wait_for, wait_until};
use solidq::{EnqueueOptions, JobRequest, JobStatus};

backend_tests!(a_frozen_worker_starts_none_of_the_jobs_it_claimed_ahead);

const WAIT: Duration = Duration::from_secs(30);
/// The workers' alive threshold.
const ALIVE_MS: &str = "1000";

/// Jobs of kind `file_ledger` claimed ahead behind a long one.
const AHEAD: usize = 8;

fn a_frozen_worker_starts_none_of_the_jobs_it_claimed_ahead(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("starts");
    let path = ledger.display().to_string();
    // The victim: one thread, so the jobs behind its long job wait for it.
    let victim = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_THREADS", "1"),
            ("SOLIDQ_TEST_ALIVE_MS", ALIVE_MS),
        ],
    );
    // Teach it that file_ledger jobs are fast: it then claims them ahead.
    let warm: Vec<FileLedger> = (0..100)
        .map(|_| FileLedger {
            path: path.clone(),
            sleep_ms: 0,
        })
        .collect();
    queue.enqueue_all(&warm).unwrap();
    wait_for("the warm-up", WAIT, || {
        file_ledger_starts(&ledger).len() == warm.len()
    });
    let victim_pid = victim.pid();
    // One claim: a long job for its idle thread, the rest ahead. How many
    // it claims ahead follows its measures of claim and job times (up to
    // all of them; none when, on a loaded machine, a ledger job measured
    // slower than a claim, as once on CI): wait for the long job's claim,
    // and take another batch while that claim took none ahead.
    let claimed_from = |long: i64| {
        db.column_of(&format!(
            "SELECT job_id AS v FROM solidq_claimed_executions WHERE job_id >= {long} ORDER BY job_id"
        ))
    };
    let mut attempts = 0;
    let long = loop {
        attempts += 1;
        let mut batch = vec![JobRequest::new(&Sleep { ms: 4_000 }, EnqueueOptions::new()).unwrap()];
        for _ in 0..AHEAD {
            batch.push(
                JobRequest::new(
                    &FileLedger {
                        path: path.clone(),
                        sleep_ms: 0,
                    },
                    EnqueueOptions::new(),
                )
                .unwrap(),
            );
        }
        let ids: Vec<i64> = queue.enqueue_all_with(&batch).unwrap();
        let long = ids[0];
        wait_for("the victim to claim the long job", WAIT, || {
            claimed_from(long).first() == Some(&long)
        });
        // The jobs ahead come with the long one, or in a claim only ahead
        // while it runs.
        if wait_until(Duration::from_secs(1), || {
            (claimed_from(long).len() > 1).then_some(())
        })
        .is_some()
        {
            break long;
        }
        assert!(
            attempts < 5,
            "{attempts} claims of the long job took no job ahead"
        );
        wait_for("the batch to finish", WAIT, || {
            ids.iter()
                .all(|&id| queue.job(id).unwrap().status == JobStatus::Succeeded)
        });
    };
    let claimed = || claimed_from(long);
    victim.freeze_outside_a_write(&db.url);
    let held = claimed();
    let ahead = &held[1..];
    assert_eq!(queue.job(long).unwrap().status, JobStatus::Running);
    for id in ahead {
        assert_eq!(
            queue.job(*id).unwrap().status,
            JobStatus::Claimed,
            "claimed ahead, not started"
        );
    }
    let victim_row = queue.job(long).unwrap().process_id.unwrap();

    // A standalone peer prunes the frozen worker (no supervisor runs) and
    // runs its jobs.
    let peer = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", ALIVE_MS)]);
    let ran_ahead = || {
        let starts = file_ledger_starts(&ledger);
        ahead
            .iter()
            .all(|id| starts.iter().any(|(job, _)| job == id))
    };
    let deadline = std::time::Instant::now() + WAIT;
    while !ran_ahead() {
        // What held the peer up, should it be held up: the frozen worker's
        // row and claims, and transactions left open (a worker frozen in
        // the middle of one holds its locks until the server ends it).
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for the peer to run every job claimed ahead \
             (victim row left: {}, its claims: {}, ledger starts: {}, open transactions: {})\n\
             the peer logged:\n{}",
            db.scalar(&format!(
                "SELECT count(*) AS v FROM solidq_processes WHERE id = {victim_row}"
            )),
            db.scalar(&format!(
                "SELECT count(*) AS v FROM solidq_claimed_executions WHERE process_id = {victim_row}"
            )),
            file_ledger_starts(&ledger).len(),
            open_transactions(db),
            peer.logs(),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_processes WHERE id = {victim_row}"
        )),
        0,
        "the frozen worker was pruned"
    );
    for id in ahead {
        assert_eq!(
            queue.job(*id).unwrap().stalled_count,
            0,
            "a job that never started is not a stall"
        );
    }

    victim.signal(libc::SIGCONT);
    // It wakes with its long job still on its thread and the others queued
    // behind it: it must drop them, and register again.
    wait_for("the woken worker to register again", WAIT, || {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_processes WHERE pid = {victim_pid} AND id <> {victim_row}"
        )) == 1
    });
    wait_for("the long job to succeed", WAIT, || {
        queue.job(long).unwrap().status == JobStatus::Succeeded
    });
    // Anything the woken worker still wanted to start would have started by
    // now; enqueue more work to be sure it still takes jobs.
    let after = queue.enqueue(&Echo { value: 1.into() }).unwrap();
    wait_for("a job enqueued afterwards", WAIT, || {
        queue.job(after).unwrap().status == JobStatus::Succeeded
    });
    let starts = file_ledger_starts(&ledger);
    for id in ahead {
        let runs: Vec<u32> = starts
            .iter()
            .filter(|(job, _)| job == id)
            .map(|(_, pid)| *pid)
            .collect();
        assert_eq!(runs.len(), 1, "job {id} started once: {runs:?}");
        assert_ne!(
            runs[0], victim_pid,
            "job {id} was started by the worker that had been pruned"
        );
    }
    drop(peer);
    drop(victim);
    assert_invariants(db);
}

/// Transactions open on the server for over 5 s (PostgreSQL and MySQL).
fn open_transactions(db: &TestDb) -> i64 {
    match db.backend {
        solidq::Backend::Postgres => db.scalar(
            "SELECT count(*)::bigint AS v FROM pg_stat_activity \
             WHERE xact_start < now() - interval '5 seconds' AND pid <> pg_backend_pid()",
        ),
        solidq::Backend::Mysql => db.scalar(
            "SELECT count(*) AS v FROM information_schema.innodb_trx \
             WHERE trx_started < NOW() - INTERVAL 5 SECOND",
        ),
        _ => 0,
    }
}
