//! One wake-up per job (PostgreSQL): of the idle workers serving the same
//! queue list, only the one holding the duty (a session advisory lock
//! waited for in line) claims on a notification; it hands the duty on when
//! its threads are full, and a frozen holder loses it to the server's
//! `idle_session_timeout`. Every worker here polls only once a minute, so
//! each pickup below came through a notification.

use crate::common;

use std::time::{Duration, Instant};

use common::child::Child;
use common::jobs::{Echo, Sleep};
use common::{TestDb, wait_for};
use solidq::{JobStatus, Queue, WorkerConfig, WorkerHandle};

/// The frozen holder's lease (`store::DUTY_LEASE`, 3 s).
const DUTY_LEASE: Duration = Duration::from_secs(3);

mod postgres {
    #[test]
    fn idle_workers_take_turns_so_a_job_costs_one_claim() {
        let Some(db) = super::TestDb::postgres() else {
            return;
        };
        super::idle_workers_take_turns_so_a_job_costs_one_claim(&db);
    }

    #[test]
    fn a_holder_whose_threads_are_full_hands_the_duty_on() {
        let Some(db) = super::TestDb::postgres() else {
            return;
        };
        super::a_holder_whose_threads_are_full_hands_the_duty_on(&db);
    }

    #[test]
    fn a_killed_holder_frees_the_duty_at_once() {
        let Some(db) = super::TestDb::postgres() else {
            return;
        };
        super::a_killed_holder_frees_the_duty_at_once(&db);
    }

    #[test]
    fn duty_sessions_ended_by_the_server_come_back() {
        let Some(db) = super::TestDb::postgres() else {
            return;
        };
        super::duty_sessions_ended_by_the_server_come_back(&db);
    }

    #[test]
    fn a_frozen_holder_loses_the_duty_to_the_next_in_line() {
        let Some(db) = super::TestDb::postgres() else {
            return;
        };
        super::a_frozen_holder_loses_the_duty_to_the_next_in_line(&db);
    }
}

/// Polling is a minute apart: a job picked up sooner was heard of.
const FALLBACK: Duration = Duration::from_secs(60);

fn start_worker(db: &TestDb, threads: usize, wake_all: bool) -> WorkerHandle {
    common::jobs::worker(db.queue())
        .config(WorkerConfig {
            threads,
            standalone: false,
            fallback_polling_interval: FALLBACK,
            wake_all,
            ..WorkerConfig::default()
        })
        .start()
        .expect("worker")
}

/// Sessions of this schema's duty for queue list `*`: holding it
/// (`granted`) or waiting in line for it.
fn duty_sessions(db: &TestDb, granted: bool) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM pg_locks l,
                (SELECT hashtextextended('solidq duty ' || current_schema() || ' *', 0) AS k) d
         WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted = {granted}
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.classid::bigint = (d.k >> 32) & 4294967295
           AND l.objid::bigint = d.k & 4294967295"
    ))
}

fn status(queue: &Queue, id: i64) -> Option<JobStatus> {
    queue.job(id).ok().map(|info| info.status)
}

fn wait_succeeded(queue: &Queue, id: i64, within: Duration) {
    wait_for(&format!("job {id} to succeed"), within, || {
        status(queue, id) == Some(JobStatus::Succeeded)
    });
}

fn claims(workers: &[WorkerHandle]) -> u64 {
    workers.iter().map(|w| w.stats().claims).sum()
}

/// Four idle workers of two threads, thirty jobs enqueued one after the
/// other: with the duty, about one claim per job; with `wake_all` (every
/// worker claims on every notification), about four.
fn idle_workers_take_turns_so_a_job_costs_one_claim(db: &TestDb) {
    const JOBS: u64 = 30;
    let queue = db.queue();
    let mut per_job = Vec::new();
    for wake_all in [false, true] {
        let workers: Vec<WorkerHandle> = (0..4).map(|_| start_worker(db, 2, wake_all)).collect();
        if !wake_all {
            wait_for(
                "one worker to hold the duty and three to wait in line",
                Duration::from_secs(30),
                || duty_sessions(db, true) == 1 && duty_sessions(db, false) == 3,
            );
        }
        // Each worker claims once as it starts.
        wait_for(
            "every worker's first claim",
            Duration::from_secs(30),
            || workers.iter().all(|w| w.stats().claims > 0),
        );
        let before = claims(&workers);
        for n in 0..JOBS {
            let id = queue
                .enqueue(&Echo {
                    value: serde_json::json!(n),
                })
                .expect("enqueue");
            wait_succeeded(&queue, id, Duration::from_secs(10));
        }
        per_job.push((claims(&workers) - before) as f64 / JOBS as f64);
        for worker in workers {
            worker.stop().expect("stop");
        }
    }
    let (turns, everyone) = (per_job[0], per_job[1]);
    eprintln!("claims per job: {turns:.2} with the duty, {everyone:.2} with wake_all");
    assert!(
        turns <= 1.5,
        "{turns:.2} claims per job with the duty (at most 1.5 expected; {everyone:.2} with wake_all)"
    );
    assert!(
        everyone >= 2.0,
        "{everyone:.2} claims per job with wake_all: every idle worker should claim (the duty's {turns:.2})"
    );
}

/// Two workers of one thread: the first job holds the holder's only
/// thread, and the second starts on the other worker while it runs.
fn a_holder_whose_threads_are_full_hands_the_duty_on(db: &TestDb) {
    let queue = db.queue();
    let workers = [start_worker(db, 1, false), start_worker(db, 1, false)];
    wait_for(
        "one worker to hold the duty and one to wait in line",
        Duration::from_secs(30),
        || duty_sessions(db, true) == 1 && duty_sessions(db, false) == 1,
    );
    let long = queue.enqueue(&Sleep { ms: 4_000 }).expect("enqueue");
    wait_for("the long job to run", Duration::from_secs(10), || {
        status(&queue, long) == Some(JobStatus::Running)
    });
    let short = queue
        .enqueue(&Echo {
            value: serde_json::json!("short"),
        })
        .expect("enqueue");
    wait_succeeded(&queue, short, Duration::from_secs(10));
    assert_eq!(
        status(&queue, long),
        Some(JobStatus::Running),
        "the second job should have run beside the first, on the other worker"
    );
    wait_succeeded(&queue, long, Duration::from_secs(10));
    for worker in workers {
        worker.stop().expect("stop");
    }
}

/// A worker process that holds the duty and its next in line, waiting
/// in line (checked in `pg_locks`).
fn holder_and_next(db: &TestDb) -> (Child, WorkerHandle) {
    let holder = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_THREADS", "1"),
            ("SOLIDQ_TEST_STANDALONE", "false"),
            ("SOLIDQ_TEST_FALLBACK_MS", "60000"),
        ],
    );
    wait_for(
        "the worker process to hold the duty",
        Duration::from_secs(30),
        || duty_sessions(db, true) == 1,
    );
    let next = start_worker(db, 1, false);
    wait_for(
        "the second worker to wait in line",
        Duration::from_secs(30),
        || duty_sessions(db, false) == 1,
    );
    (holder, next)
}

/// The holder is killed: its session ends with it, and the next in line
/// holds the duty and picks up a job sooner than the frozen holder's
/// lease could pass.
fn a_killed_holder_frees_the_duty_at_once(db: &TestDb) {
    let queue = db.queue();
    let (holder, next) = holder_and_next(db);
    holder.signal(libc::SIGKILL);
    let killed = Instant::now();
    let id = queue
        .enqueue(&Echo {
            value: serde_json::json!("after the kill"),
        })
        .expect("enqueue");
    wait_succeeded(&queue, id, Duration::from_secs(15));
    let took = killed.elapsed();
    assert!(
        took < DUTY_LEASE,
        "picked up {took:?} after the kill: the duty waited for a lease, not for the session's end"
    );
    next.stop().expect("stop");
}

/// The server ends every duty session (an outage of the duty's
/// connections alone): the workers act on what they hear meanwhile, open
/// new sessions, and one holds the duty again.
fn duty_sessions_ended_by_the_server_come_back(db: &TestDb) {
    let queue = db.queue();
    let workers = [start_worker(db, 1, false), start_worker(db, 1, false)];
    wait_for(
        "one holder and one in line",
        Duration::from_secs(30),
        || duty_sessions(db, true) == 1 && duty_sessions(db, false) == 1,
    );
    let ended = db.scalar(
        "SELECT count(pg_terminate_backend(pid)) AS v FROM pg_locks
         WHERE locktype = 'advisory' AND objsubid = 1 AND pid <> pg_backend_pid()
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND pid IN (SELECT pid FROM pg_stat_activity
                       WHERE application_name = current_setting('application_name'))",
    );
    assert_eq!(ended, 2, "both duty sessions ended");
    let id = queue
        .enqueue(&Echo {
            value: serde_json::json!("while the sessions are gone"),
        })
        .expect("enqueue");
    wait_succeeded(&queue, id, Duration::from_secs(15));
    wait_for("the duty held again", Duration::from_secs(15), || {
        duty_sessions(db, true) == 1 && duty_sessions(db, false) == 1
    });
    let id = queue
        .enqueue(&Echo {
            value: serde_json::json!("after"),
        })
        .expect("enqueue");
    wait_succeeded(&queue, id, Duration::from_secs(15));
    for worker in workers {
        worker.stop().expect("stop");
    }
}

/// A worker process holds the duty and is frozen; the worker waiting in
/// line gets the duty once the server ends the frozen holder's silent
/// session, and picks up a job enqueued meanwhile long before its poll.
fn a_frozen_holder_loses_the_duty_to_the_next_in_line(db: &TestDb) {
    let queue = db.queue();
    let (holder, next) = holder_and_next(db);
    holder.signal(libc::SIGSTOP);
    let frozen = Instant::now();
    let id = queue
        .enqueue(&Echo {
            value: serde_json::json!("while frozen"),
        })
        .expect("enqueue");
    // The duty's lease is 3 s of silence.
    wait_succeeded(&queue, id, Duration::from_secs(15));
    let took = frozen.elapsed();
    assert!(
        took < FALLBACK / 4,
        "picked up after {took:?}: by the fallback poll, not by the next in line"
    );
    holder.signal(libc::SIGCONT);
    next.stop().expect("stop");
}
