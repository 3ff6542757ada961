//! No supervisor at all (DESIGN: "dead processes still pruned, their jobs
//! still run"): two standalone workers, the README's basic deployment. One
//! is SIGKILLed mid-job; the other prunes it and runs the job within the
//! alive threshold and a few seconds, counting the stall once. A
//! standalone dispatcher does the same for a worker it outlives.

use crate::common;

use std::time::{Duration, Instant};

use common::child::Child;
use common::jobs::Ledger;
use common::{TestDb, assert_invariants, wait_for};
use solidq::{Dispatcher, DispatcherConfig, JobStatus};

backend_tests!(
    without_a_supervisor_a_killed_workers_job_runs_on_its_peer,
    a_standalone_dispatcher_releases_a_dead_workers_jobs,
);

const WAIT: Duration = Duration::from_secs(30);
const ALIVE: Duration = Duration::from_secs(1);

fn starts(db: &TestDb, job: i64) -> Vec<i64> {
    db.column_of(&format!(
        "SELECT pid AS v FROM test_ledger WHERE job_id = {job} AND event = 'start' ORDER BY seq"
    ))
}

/// Starts a standalone worker and gives it a job that runs `sleep_ms`;
/// returns them once the job started on it.
fn busy_worker(db: &TestDb, sleep_ms: u64) -> (Child, i64) {
    let queue = db.queue();
    let worker = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    let id = queue
        .enqueue(&Ledger {
            url: db.url.clone(),
            n: 1,
            sleep_ms,
        })
        .unwrap();
    wait_for("the job to start", WAIT, || !starts(db, id).is_empty());
    assert_eq!(starts(db, id), [i64::from(worker.pid())]);
    (worker, id)
}

fn without_a_supervisor_a_killed_workers_job_runs_on_its_peer(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let (victim, id) = busy_worker(db, 60_000);
    let peer = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    wait_for("the peer to register", WAIT, || {
        db.count("solidq_processes") == 2
    });
    victim.signal(libc::SIGKILL);
    let killed = Instant::now();
    wait_for("the peer to start the job again", WAIT, || {
        starts(db, id).len() == 2
    });
    let recovered = killed.elapsed();
    assert_eq!(starts(db, id)[1], i64::from(peer.pid()));
    // The peer judges others only once healthy for a threshold, then within
    // a heartbeat interval sees the victim's heartbeat a threshold old.
    assert!(
        recovered < ALIVE * 2 + Duration::from_secs(3),
        "recovered after {recovered:?}"
    );
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Running);
    assert_eq!(info.stalled_count, 1, "the stall is counted once");
    eprintln!(
        "{}: a killed standalone worker's job ran on its peer {recovered:?} after the kill",
        db.backend
    );
    drop(peer);
    drop(victim);
}

fn a_standalone_dispatcher_releases_a_dead_workers_jobs(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let (victim, id) = busy_worker(db, 60_000);
    let dispatcher = Dispatcher::new(queue.clone())
        .config(DispatcherConfig {
            heartbeat_interval: Duration::from_millis(200),
            process_alive_threshold: ALIVE,
            ..DispatcherConfig::default()
        })
        .start()
        .unwrap();
    victim.signal(libc::SIGKILL);
    wait_for("the dead worker's job to be released", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Ready
    });
    let info = queue.job(id).unwrap();
    assert_eq!(info.stalled_count, 1);
    // Its stall history names the process that died holding it; the
    // attempt did not end.
    let process = queue
        .processes()
        .unwrap()
        .into_iter()
        .find(|p| p.pid == victim.pid() as i32);
    assert!(process.is_none(), "the dead worker was pruned");
    let stall = info.errors.last().expect("a stall record");
    assert_eq!(stall.kind, "stalled");
    assert_eq!(stall.attempt, None);
    assert!(
        stall.message.starts_with("process ")
            && stall
                .message
                .contains("died while running it (stall 1 of at most"),
        "{}",
        stall.message
    );
    // What is known of how it ended: its silence, by the database's clock.
    assert!(
        stall.message.contains(&format!("pid {} on ", victim.pid()))
            && stall.message.contains("stopped heartbeating at")
            && stall
                .message
                .ends_with("released to run again, alone in its process"),
        "{}",
        stall.message
    );
    assert_eq!(info.attempts, 0);
    dispatcher.stop().unwrap();
    drop(victim);
    assert_invariants(db);
}
