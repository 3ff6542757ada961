//! Job control and progress from the command line, on both backends:
//! `job cancel|run-now`, `jobs cancel|run-now` with filters and counts,
//! and progress in `job` and `jobs`.

#[macro_use]
mod common;

use std::time::Duration;

use common::jobs::Echo;
use common::{TestDb, run_cli};
use serde_json::Value;
use solidq::{EnqueueOptions, JobStatus};

backend_tests!(
    job_control_commands_act_and_report_counts,
    progress_shows_in_job_and_jobs,
    migrate_reads_the_configuration_like_every_command,
);

fn json(db: &TestDb, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = run_cli(db, &args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn job_control_commands_act_and_report_counts(db: &TestDb) {
    let queue = db.queue();
    let later = |q: &str| {
        queue
            .enqueue_with(
                &Echo { value: 1.into() },
                EnqueueOptions::new()
                    .queue(q)
                    .delay(Duration::from_secs(3600)),
            )
            .unwrap()
    };
    let (a, b, c) = (later("mail"), later("mail"), later("other"));
    let ready = queue.enqueue(&Echo { value: 2.into() }).unwrap();

    let done = json(
        db,
        &[
            "job",
            "cancel",
            &a.to_string(),
            "--reason",
            "typo in address",
        ],
    );
    assert_eq!(done["discarded"], 1);
    let info = queue.job(a).unwrap();
    assert_eq!(info.status, JobStatus::Discarded);
    assert!(info.error.unwrap().message.contains("typo in address"));

    let moved = json(db, &["job", "run-now", &b.to_string()]);
    assert_eq!(moved["run_now"], serde_json::json!([b]));
    assert_eq!(queue.job(b).unwrap().status, JobStatus::Ready);
    // Nothing to run now: exit 1, said plainly.
    let (code, _, err) = run_cli(db, &["job", "run-now", &ready.to_string()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("scheduled, retrying or blocked"), "{err}");
    // A job that does not exist: exit 1.
    let (code, _, err) = run_cli(db, &["job", "cancel", "999999"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("999999"), "{err}");

    // Bulk, by filter, with counts; a filter is required.
    let done = json(
        db,
        &["jobs", "cancel", "--queue", "mail", "--reason", "bulk"],
    );
    assert_eq!(
        (done["discarded"].as_u64(), done["untouched"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(queue.job(b).unwrap().status, JobStatus::Discarded);
    assert_eq!(queue.job(c).unwrap().status, JobStatus::Scheduled);
    let moved = json(db, &["jobs", "run-now", "--queue", "other"]);
    assert_eq!(moved["run_now"], 1);
    assert_eq!(queue.job(c).unwrap().status, JobStatus::Ready);
    let (code, _, err) = run_cli(db, &["jobs", "cancel"]);
    assert_eq!(code, 2, "no filter: a usage error: {err}");
    // The listing still works beside the new subcommands.
    let listed = json(db, &["jobs", "--queue", "other"]);
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
}

fn progress_shows_in_job_and_jobs(db: &TestDb) {
    let queue = db.queue();
    let id = queue.enqueue(&Echo { value: 1.into() }).unwrap();
    // As a running worker leaves it.
    // No RETURNING on MySQL: the row is found by its name, the only one.
    db.execute(
        "INSERT INTO solidq_processes (kind, name, pid, hostname, metadata, last_heartbeat_at, created_at)
         VALUES ('worker', 'w', 1, 'h', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
    );
    let worker_row = db.scalar("SELECT id AS v FROM solidq_processes WHERE name = 'w'");
    db.execute(&format!(
        "DELETE FROM solidq_ready_executions WHERE job_id = {id};
         INSERT INTO solidq_claimed_executions (job_id, process_id, created_at, started_at)
         VALUES ({id}, {worker_row}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP);
         UPDATE solidq_jobs SET progress = '{{\"done\": 40, \"total\": 1000}}' WHERE id = {id};"
    ));
    let shown = json(db, &["job", &id.to_string()]);
    assert_eq!(
        shown["progress"],
        serde_json::json!({ "done": 40, "total": 1000 })
    );
    assert_eq!(shown["status"], "running");
    let (code, out, err) = run_cli(db, &["job", &id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("progress") && out.contains("\"done\":40"),
        "{out}"
    );
    let (code, out, err) = run_cli(db, &["jobs"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("running 40/1000"), "{out}");
}

fn migrate_reads_the_configuration_like_every_command(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("solidq.toml");
    std::fs::write(&config, format!("database_url = {:?}\n", db.url)).unwrap();
    let run = |args: &[&str], cwd: &std::path::Path| common::run_cli_in(cwd, None, args);
    let (code, out, err) = run(
        &["migrate", "--config", config.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("applied") || out.contains("up to date"),
        "{out}"
    );
    // ./solidq.toml, as every other command reads it.
    let (code, out, err) = run(&["migrate"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("up to date"), "{out}");
    let (code, _, err) = run(&["queues"], dir.path());
    assert_eq!(code, 0, "{err}");
}
