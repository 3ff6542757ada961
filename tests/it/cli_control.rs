//! Job control and progress from the command line, on every backend:
//! `job cancel|run-now`, `jobs cancel|run-now` with filters and counts,
//! progress in `job` and `jobs`, and one exit-code rule for every command
//! (0 did it, 1 nothing matched or refused, 2 bad usage).

use crate::common;

use std::time::Duration;

use common::jobs::Echo;
use common::{TestDb, run_cli};
use serde_json::Value;
use solidq::{EnqueueOptions, JobStatus};

backend_tests!(
    job_control_commands_act_and_report_counts,
    progress_shows_in_job_and_jobs,
    migrate_reads_the_configuration_like_every_command,
    every_command_exits_by_one_rule,
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
    // A job that ended already: nothing cancelled, exit 1 (as run-now).
    let (code, _, err) = run_cli(db, &["job", "cancel", &a.to_string()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing to cancel"), "{err}");

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

/// Issue 26 item 3: one rule for every command's exit code. 0: it did what
/// it was asked (a listing printed, the schema current, an action that
/// changed at least one job, queue or task); 1: nothing matched or it was
/// refused (an action that changed nothing, an unknown name or id, a taken
/// unique key); 2: bad usage, nothing written. The connection flags go
/// before or after the command.
fn every_command_exits_by_one_rule(db: &TestDb) {
    let queue = db.queue();
    let attempts_once = || EnqueueOptions::new().max_attempts(1);
    let failed: Vec<i64> = (0..2)
        .map(|n| {
            queue
                .enqueue_with(
                    &common::jobs::Fail {
                        message: format!("boom {n}"),
                    },
                    attempts_once(),
                )
                .unwrap()
        })
        .collect();
    let done = queue.enqueue(&Echo { value: 1.into() }).unwrap();
    common::jobs::worker(queue.clone()).drain().unwrap();
    assert_eq!(queue.job(done).unwrap().status, JobStatus::Succeeded);
    let later = |q: &str| {
        queue
            .enqueue_with(
                &Echo { value: 2.into() },
                EnqueueOptions::new()
                    .queue(q)
                    .delay(Duration::from_secs(3600)),
            )
            .unwrap()
            .to_string()
    };
    let (mail_1, _mail_2) = (later("mail"), later("mail"));
    let ready = queue
        .enqueue_with(
            &Echo { value: 3.into() },
            EnqueueOptions::new().queue("idle"),
        )
        .unwrap()
        .to_string();
    let task = solidq::RecurringTask::untyped("yearly", "0 0 1 1 *", "echo", serde_json::json!({}))
        .unwrap();
    solidq::Scheduler::new(queue.clone())
        .task(task)
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let (done, failed_0, failed_1) = (
        done.to_string(),
        failed[0].to_string(),
        failed[1].to_string(),
    );
    // In order: each row runs on what the rows before left.
    let rows: Vec<(Vec<&str>, i32, &str)> = vec![
        // Listings and the schema: done, empty or not.
        (vec!["queues"], 0, ""),
        (vec!["jobs", "--status", "blocked"], 0, ""),
        (vec!["job", &done], 0, ""),
        (vec!["processes"], 0, ""),
        (vec!["recurring"], 0, ""),
        (vec!["migrate"], 0, ""),
        (vec!["job", "999999"], 1, "job 999999 not found"),
        (vec!["batch", "999999"], 1, "batch 999999 not found"),
        // Actions: 0 when they changed something, else 1.
        (vec!["pause", "mail"], 0, ""),
        (
            vec!["pause", "mail"],
            1,
            "nothing to pause: queue mail was paused already",
        ),
        (vec!["resume", "mail"], 0, ""),
        (vec!["resume", "mail"], 1, "nothing to resume"),
        (vec!["job", "run-now", &mail_1], 0, ""),
        (vec!["job", "run-now", &ready], 1, "nothing to run now"),
        (vec!["jobs", "run-now", "--queue", "mail"], 0, ""),
        (
            vec!["jobs", "run-now", "--queue", "mail"],
            1,
            "nothing to run now",
        ),
        (vec!["jobs", "cancel", "--queue", "mail"], 0, ""),
        (
            vec!["jobs", "cancel", "--queue", "mail"],
            1,
            "nothing to cancel",
        ),
        (vec!["job", "cancel", &done], 1, "nothing to cancel"),
        (vec!["job", "cancel", &ready], 0, ""),
        (vec!["failed", "retry", &failed_0], 0, ""),
        (
            vec!["failed", "retry", &failed_0],
            1,
            "is ready, not failed",
        ),
        (vec!["failed", "discard", "--all"], 0, ""),
        (vec!["failed", "discard", "--all"], 1, "nothing to discard"),
        (vec!["failed", "retry", &failed_1], 1, "not found"),
        (vec!["recurring", "run", "yearly"], 0, ""),
        (
            vec!["recurring", "run", "nightly"],
            1,
            "unknown recurring task \"nightly\"",
        ),
        (vec!["clear-finished", "--older-than", "0s"], 0, ""),
        (vec!["clear-finished"], 1, "nothing to delete"),
        (vec!["enqueue", "echo", "--unique-key", "k"], 0, ""),
        (
            vec!["enqueue", "echo", "--unique-key", "k"],
            1,
            "unique key \"k\" already exists",
        ),
        (vec!["enqueue", "ecoh"], 1, "unknown kind \"ecoh\""),
        (
            vec!["jobs", "cancel", "--kind", "ecoh"],
            1,
            "unknown kind \"ecoh\"",
        ),
        // Bad usage: 2, nothing written.
        (vec!["jobs", "--limit", "0"], 2, "--limit"),
        (
            vec!["jobs", "cancel", "--queue", "mail", "--limit", "0"],
            2,
            "--limit",
        ),
        (vec!["enqueue", "echo", "--args", "{"], 2, "not JSON"),
        (vec!["pause", "no such"], 2, "queue name"),
        (vec!["jobs", "--status", "sleepy"], 2, "possible values"),
        (vec!["frobnicate"], 2, "unrecognized subcommand"),
        (vec!["supervisor", "--database-url", &db.url], 2, "--config"),
    ];
    for (args, code, expected) in rows {
        let (exit, out, err) = run_cli(db, &args);
        assert_eq!(exit, code, "{args:?}: {out}{err}");
        if code == 0 {
            assert_eq!(err, "", "{args:?}");
        } else {
            assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
            assert!(
                err.contains(expected),
                "{args:?}: expected {expected:?} in {err}"
            );
        }
    }
    assert_eq!(queue.job(failed[0]).unwrap().status, JobStatus::Ready);
    assert!(queue.job(failed[1]).is_err(), "discarded");

    // The connection flags before the command, as after it.
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| common::run_cli_in(dir.path(), None, args);
    for args in [
        vec!["--database-url", &db.url, "queues"],
        vec!["queues", "--database-url", &db.url],
        vec!["--database-url", &db.url, "jobs", "--limit", "1"],
        vec![
            "--database-url",
            &db.url,
            "failed",
            "retry",
            &failed_0,
            "--json",
        ],
    ] {
        let (exit, _, err) = cli(&args);
        let expected = if args.contains(&"retry") { 1 } else { 0 };
        assert_eq!(exit, expected, "{args:?}: {err}");
    }
    let config = dir.path().join("solidq.toml");
    std::fs::write(&config, format!("database_url = {:?}\n", db.url)).unwrap();
    let config = config.to_str().unwrap();
    let (exit, _, err) = cli(&["--config", config, "job", "cancel", "999999"]);
    assert_eq!(exit, 1, "{err}");
    assert!(err.contains("job 999999 not found"), "{err}");

    // A warning never precedes a refusal it has nothing to do with: a
    // forced unknown kind whose enqueue is refused for its unique key
    // says only why it was refused.
    let (exit, _, err) = run_cli(
        db,
        &["enqueue", "new_kind", "--force", "--unique-key", "once"],
    );
    assert_eq!(exit, 0, "{err}");
    assert!(err.contains("warning: unknown kind"), "{err}");
    let (exit, _, err) = run_cli(
        db,
        &["enqueue", "newer_kind", "--force", "--unique-key", "once"],
    );
    assert_eq!(exit, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unique key \"once\""), "{err}");
}
