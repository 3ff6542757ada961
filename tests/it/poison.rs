//! A job that kills its process takes no one with it (DESIGN: "a job that
//! kills its process"): under a supervisor with one worker process of 4
//! threads, a job that aborts its process (SIGABRT, as a segfault in a C
//! library or a `panic = "abort"` build would) among 400 healthy jobs.
//! The jobs running beside it at its first crash are released as stalls
//! and each runs again alone in its process, so they succeed; the poison
//! job runs alone too, crashes alone, and fails after
//! `max_stalled_count` + 1 runs with the signal in its error, on every
//! surface a user reads. And a worker process that aborts at start (a bad
//! build) is restarted with a back-off the supervisor announces once per
//! step, reset by a healthy run, while the supervisor stays up.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::child::{Child, child_command};
use common::jobs::{Abort, Ledger};
use common::{TestDb, wait_for};
use solidq::{JobInfo, JobStatus, Queue};
use tower::ServiceExt;

/// Each runs a supervisor and hundreds of jobs through crashes: with no
/// other test beside them, so the suite's others keep their timing.
mod heavy {
    use super::*;

    backend_tests!(
        alone: a_poison_job_fails_alone_and_every_job_beside_it_succeeds,
        with_max_stalled_count_3_a_poison_job_runs_at_most_4_times,
    );
}

#[test]
fn a_worker_that_aborts_at_start_is_restarted_with_a_growing_back_off() {
    crash_loop();
}

/// A supervisor of one worker process of 4 threads, heartbeats every
/// 100 ms.
fn supervisor(db: &TestDb, max_stalled: u32) -> Child {
    Child::supervisor(&format!(
        r#"
database_url = "{url}"
heartbeat_interval = "100ms"
process_alive_threshold = "1s"
shutdown_timeout = "3s"
max_stalled_count = {max_stalled}

[[workers]]
command = {command:?}
processes = 1
threads = 4
polling_interval = "50ms"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
        url = db.url,
        command = child_command(),
    ))
}

/// Stops `child` with SIGTERM; its logs, once it exited 0.
fn stop(mut child: Child) -> String {
    child.signal(libc::SIGTERM);
    let status = child
        .wait_timeout(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("did not stop: {}", child.logs()));
    assert!(status.success(), "exit {status:?}: {}", child.logs());
    child.logs()
}

/// Starts of each job's code, by job id.
fn starts(db: &TestDb) -> std::collections::HashMap<i64, i64> {
    let mut conn = db.conn();
    let ids = conn.column("SELECT job_id AS v FROM test_ledger WHERE event = 'start'");
    let mut counts = std::collections::HashMap::new();
    for id in ids {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// Enqueues `healthy` jobs of 20 ms with the poison job in their middle;
/// returns the poison job's id and the healthy ones'.
fn enqueue(db: &TestDb, queue: &Queue, healthy: i64) -> (i64, Vec<i64>) {
    let ledger = |n| Ledger {
        url: db.url.clone(),
        n,
        sleep_ms: 20,
    };
    let mut ids = queue
        .enqueue_all(&(0..healthy / 2).map(ledger).collect::<Vec<_>>())
        .unwrap();
    let poison = queue
        .enqueue(&Abort {
            url: db.url.clone(),
        })
        .unwrap();
    ids.extend(
        queue
            .enqueue_all(&(healthy / 2..healthy).map(ledger).collect::<Vec<_>>())
            .unwrap(),
    );
    (poison, ids)
}

/// Waits until every one of `ids` has ended (succeeded or failed).
fn wait_ended(queue: &Queue, ids: &[i64], supervisor: &Child) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let open: Vec<JobInfo> = ids
            .iter()
            .map(|id| queue.job(*id).unwrap())
            .filter(|j| !matches!(j.status, JobStatus::Succeeded | JobStatus::Failed))
            .collect();
        if open.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} jobs have not ended, the first {:?}; the supervisor said:\n{}",
            open.len(),
            open.first(),
            supervisor.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn a_poison_job_fails_alone_and_every_job_beside_it_succeeds(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let (poison, healthy) = enqueue(db, &queue, 400);
    let supervisor = supervisor(db, 1);
    let mut all = healthy.clone();
    all.push(poison);
    wait_ended(&queue, &all, &supervisor);

    let starts = starts(db);
    // The poison job: failed after max_stalled_count + 1 runs, the signal
    // in its error.
    let info = queue.job(poison).unwrap();
    assert_eq!(info.status, JobStatus::Failed, "{info:?}");
    assert_eq!(
        starts.get(&poison),
        Some(&2),
        "ran max_stalled_count + 1 times"
    );
    assert_eq!(info.stalled_count, 2);
    let error = info.error.clone().expect("its error");
    assert_eq!(error.kind, "stalled");
    assert!(
        error.message.contains("stalled 2 times") && error.message.contains("signal 6 (SIGABRT)"),
        "{}",
        error.message
    );
    assert!(
        info.errors
            .iter()
            .any(|e| e.kind == "stalled" && e.message.contains("signal 6 (SIGABRT)")),
        "its stall history names the signal: {:?}",
        info.errors
    );

    // Every healthy job succeeded, none ran more than twice; those that
    // ran beside the poison job at its first crash ran again, alone, and
    // their stall names the signal too.
    let mut rerun = Vec::new();
    for id in &healthy {
        let job = queue.job(*id).unwrap();
        assert_eq!(
            job.status,
            JobStatus::Succeeded,
            "healthy job {id}: {job:?}"
        );
        let ran = starts.get(id).copied().unwrap_or(0);
        assert!(
            (1..=2).contains(&ran),
            "healthy job {id} started {ran} times"
        );
        assert!(job.stalled_count <= 1, "healthy job {id}: {job:?}");
        if job.stalled_count == 1 {
            assert!(
                job.errors
                    .iter()
                    .any(|e| e.message.contains("signal 6 (SIGABRT)")
                        && e.message.contains("alone in its process")),
                "healthy job {id}: {:?}",
                job.errors
            );
            rerun.push(*id);
        }
    }
    eprintln!(
        "{:?}: the poison job ran {} times and failed: {}; 0 of {} healthy jobs failed, {} ran twice (beside its first crash): {rerun:?}",
        db.backend,
        starts[&poison],
        error.message,
        healthy.len(),
        rerun.len(),
    );

    // The same error on every surface a user reads: the CLI, the API and
    // the dashboard's job page.
    let cli = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["job", &poison.to_string()])
        .env("SOLIDQ_DATABASE_URL", &db.url)
        .env("RUST_LOG", "warn")
        .env_remove("COLUMNS")
        .output()
        .expect("run solidq job");
    let cli = String::from_utf8_lossy(&cli.stdout);
    assert!(cli.contains("SIGABRT"), "solidq job {poison}:\n{cli}");
    let mut config = solidq_web::WebConfig::new();
    config.admin_token = Some("admin".into());
    let router = solidq_web::router(queue.clone(), config).unwrap();
    for path in [format!("/api/jobs/{poison}"), format!("/jobs/{poison}")] {
        let request = Request::get(&path)
            .header(header::AUTHORIZATION, "Bearer admin")
            .body(Body::empty())
            .unwrap();
        let (status, body) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let response = router.clone().oneshot(request).await.unwrap();
                let status = response.status();
                let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
                    .await
                    .unwrap();
                (status, String::from_utf8_lossy(&bytes).into_owned())
            });
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains("SIGABRT"), "{path}: {body}");
    }

    let logs = stop(supervisor);
    assert!(
        logs.contains("runs alone"),
        "the worker said which jobs ran alone:\n{logs}"
    );
    common::assert_invariants(db);
}

fn with_max_stalled_count_3_a_poison_job_runs_at_most_4_times(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let (poison, healthy) = enqueue(db, &queue, 40);
    let supervisor = supervisor(db, 3);
    let mut all = healthy.clone();
    all.push(poison);
    wait_ended(&queue, &all, &supervisor);
    let starts = starts(db);
    let info = queue.job(poison).unwrap();
    assert_eq!(info.status, JobStatus::Failed, "{info:?}");
    assert_eq!(starts.get(&poison), Some(&4), "max_stalled_count + 1 runs");
    assert!(
        info.error
            .as_ref()
            .is_some_and(|e| e.message.contains("stalled 4 times")),
        "{:?}",
        info.error
    );
    let logs = stop(supervisor);
    for id in &healthy {
        let job = queue.job(*id).unwrap();
        let runs = starts.get(id).copied().unwrap_or(0);
        assert!(
            job.status == JobStatus::Succeeded && runs <= 2,
            "healthy job {id} ran {runs} times: {job:?}\nthe supervisor said:\n{logs}"
        );
    }
    common::assert_invariants(db);
}

/// A worker command that aborts at once three times, then runs 1.5 s
/// (longer than the 1 s `restart_backoff_window`) and aborts, then stays
/// up: the restarts wait 100, 200 and 400 ms, each step announced once;
/// the healthy run resets the back-off; the supervisor stays up.
fn crash_loop() {
    let db = TestDb::sqlite();
    let _queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("runs");
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; \
         if [ $n -lt 3 ]; then kill -ABRT $$; fi; \
         if [ $n -eq 3 ]; then sleep 1.5; kill -ABRT $$; fi; \
         exec sleep 60",
        c = counter.display()
    );
    let mut supervisor = Child::supervisor(&format!(
        r#"
database_url = "{url}"
heartbeat_interval = "100ms"
process_alive_threshold = "1s"
restart_backoff_window = "1s"
restart_backoff_max = "300ms"

[[workers]]
command = ["sh", "-c", {script:?}]
"#,
        url = db.url,
    ));
    let runs = || {
        std::fs::read_to_string(&counter)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    wait_for("the fifth run", Duration::from_secs(20), || runs() >= 5);
    assert!(
        supervisor.wait_timeout(Duration::ZERO).is_none(),
        "the supervisor stays up: {}",
        supervisor.logs()
    );
    let logs = stop(supervisor);
    let announced: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("a crash loop; restarting in"))
        .collect();
    assert_eq!(
        announced.len(),
        3,
        "three quick exits, each back-off step said once:\n{logs}"
    );
    for (line, delay) in announced.iter().zip(["100ms", "200ms", "300ms"]) {
        assert!(line.contains(&format!("restarting in {delay}")), "{line}");
        assert!(line.contains("signal 6 (SIGABRT)"), "{line}");
    }
    assert!(
        announced[2].contains("said once"),
        "at the cap it says it will say no more: {}",
        announced[2]
    );
    // The run of 1.5 s reset it: restarted at once, no crash loop.
    assert!(
        logs.lines()
            .any(|l| l.contains("after 1.") && l.ends_with("; restarting")),
        "a healthy run resets the back-off:\n{logs}"
    );
}
