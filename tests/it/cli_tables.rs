//! What operators read (issue 12, items 12–13), on both backends: tables
//! that fit 80 and 60 columns without splitting an id or a time, no
//! trailing padding; `jobs` says how many there are and pages; search by
//! argument and error text; failed jobs show when they failed; a panic's
//! backtrace shows the user's frames first.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::jobs::{Echo, Fail, Flaky, Panic, Sleep};
use common::{TestDb, wait_for};
use serde_json::{Value, json};
use solidq::{EnqueueOptions, JobStatus, Queue, WorkerConfig};

backend_tests!(
    tables_fit_the_width_and_jobs_pages,
    jobs_are_found_by_argument_and_error_text,
    failed_jobs_show_when_they_failed_and_user_frames_first,
    records_show_what_happened_on_each_path,
    every_queue_is_listed_with_its_waiting_jobs,
);

/// Runs `solidq args…` on `db`, with `COLUMNS` set to `width` (or unset);
/// returns (exit code, stdout, stderr), asserting exit 0.
fn run(db: &TestDb, args: &[&str], width: Option<usize>) -> (String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_solidq"));
    command
        .args(args)
        .env("SOLIDQ_DATABASE_URL", &db.url)
        .env("RUST_LOG", "warn")
        .env_remove("COLUMNS")
        .current_dir(std::env::temp_dir());
    if let Some(width) = width {
        command.env("COLUMNS", width.to_string());
    }
    let output = command.output().expect("run solidq");
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{args:?}: {err}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), err)
}

fn json_of(db: &TestDb, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (out, _) = run(db, &args, None);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn ids(document: &Value) -> Vec<i64> {
    document["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

/// A JSON time (RFC 3339) as tables print it: `2026-11-23 14:05:09Z`.
fn table_time(json_time: &Value) -> String {
    let t = json_time.as_str().unwrap();
    format!("{}Z", t[..19].replace('T', " "))
}

fn no_trailing_spaces(text: &str) {
    for line in text.lines() {
        assert_eq!(line, line.trim_end(), "trailing spaces: {line:?}");
    }
}

fn tables_fit_the_width_and_jobs_pages(db: &TestDb) {
    let queue = db.queue();
    let kind = "export_orders_to_the_accounting_system";
    let on = || EnqueueOptions::new().queue("exports_for_accounting");
    let ids_in_order: Vec<i64> = (0..60)
        .map(|n| queue.enqueue_kind(kind, &json!({ "n": n }), on()).unwrap())
        .collect();

    // Piped: every cell whole, 50 of 60 said, the next page named.
    let (out, err) = run(db, &["jobs"], None);
    assert_eq!(out.lines().count(), 51, "{out}");
    assert!(out.contains(kind), "{out}");
    no_trailing_spaces(&out);
    let last_shown = ids_in_order[10];
    assert!(
        err.contains(&format!("jobs 1–50 of 60; next page: --after {last_shown}")),
        "{err}"
    );
    let (out, err) = run(db, &["jobs", "--after", &last_shown.to_string()], None);
    assert_eq!(out.lines().count(), 11, "{out}");
    assert!(
        err.contains("jobs 51–60 of 60") && !err.contains("next page"),
        "{err}"
    );
    let first = json_of(db, &["jobs"]);
    assert_eq!(
        (&first["total"], &first["next_after"]),
        (&json!(60), &json!(last_shown))
    );
    let second = json_of(db, &["jobs", "--after", &last_shown.to_string()]);
    let expected: Vec<i64> = ids_in_order[..10].iter().rev().copied().collect();
    assert_eq!(ids(&second), expected);
    assert_eq!(second["next_after"], Value::Null);
    let (_, err) = run(db, &["jobs", "--limit", "100"], None);
    assert!(err.is_empty(), "everything shown, nothing to say: {err}");

    // At 80 and 60 columns: lines fit, ids and times whole, the kind cut.
    let listed = json_of(db, &["jobs", "--limit", "5"]);
    for width in [80, 60] {
        let (out, err) = run(db, &["jobs", "--limit", "5"], Some(width));
        no_trailing_spaces(&out);
        assert_eq!(out.lines().count(), 6, "{out}");
        for (line, job) in out.lines().skip(1).zip(listed["jobs"].as_array().unwrap()) {
            assert!(line.chars().count() <= width, "{width}: {line:?}");
            let id = job["id"].as_i64().unwrap().to_string();
            assert!(line.trim_start().starts_with(&format!("{id} ")), "{line:?}");
            assert!(line.contains(&table_time(&job["scheduled_at"])), "{line:?}");
            assert!(line.contains("export_or") && line.contains('…'), "{line:?}");
        }
        if width == 60 {
            assert!(err.contains("hidden to fit the width: "), "{err}");
        }
    }
    for width in [80, 60] {
        let (out, _) = run(db, &["queues"], Some(width));
        no_trailing_spaces(&out);
        assert!(out.lines().all(|l| l.chars().count() <= width), "{out}");
        assert!(out.lines().nth(1).unwrap().contains(" 60"), "{out}");
    }
}

fn jobs_are_found_by_argument_and_error_text(db: &TestDb) {
    let queue: Queue = db.queue();
    let idle = || EnqueueOptions::new().queue("idle");
    let echo = |value: &str| {
        queue
            .enqueue_with(
                &Echo {
                    value: json!(value),
                },
                idle(),
            )
            .unwrap()
    };
    let order = echo("order-4711");
    let other = echo("ORDER-4712");
    let percent = echo("100% done");
    let failing = queue
        .enqueue_with(
            &Fail {
                message: "Connection REFUSED by smtp.example".into(),
            },
            EnqueueOptions::new().queue("work"),
        )
        .unwrap();
    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            queues: vec!["work".into()],
            shutdown_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the failing job to fail", Duration::from_secs(30), || {
        queue.job(failing).unwrap().status == JobStatus::Failed
    });
    worker.stop().unwrap();

    let search = |args: &[&str]| {
        let mut all = vec!["jobs"];
        all.extend_from_slice(args);
        ids(&json_of(db, &all))
    };
    assert_eq!(search(&["--args", "order-4711"]), [order]);
    let both = json_of(db, &["jobs", "--args", "Order-471"]);
    assert_eq!(ids(&both), [other, order], "any case");
    assert_eq!(both["total"], json!(2));
    assert_eq!(search(&["--args", "%"]), [percent], "% is itself");
    assert!(search(&["--args", "_"]).is_empty(), "_ is itself");
    assert_eq!(search(&["--error", "connection refused"]), [failing]);
    assert_eq!(
        search(&["--error", "smtp.example", "--status", "failed"]),
        [failing]
    );
    assert!(search(&["--error", "no such error"]).is_empty());
    assert!(search(&["--error", "refused", "--queue", "idle"]).is_empty());
    let (out, _) = run(db, &["jobs", "--error", "refused"], None);
    assert!(out.contains("Connection REFUSED by smtp.example"), "{out}");
}

fn failed_jobs_show_when_they_failed_and_user_frames_first(db: &TestDb) {
    let queue = db.queue();
    let failed = queue
        .enqueue_with(
            &Panic {
                message: "boom".into(),
            },
            EnqueueOptions::new().queue("work"),
        )
        .unwrap();
    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            queues: vec!["work".into()],
            shutdown_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the panic to fail", Duration::from_secs(30), || {
        queue.job(failed).unwrap().status == JobStatus::Failed
    });
    worker.stop().unwrap();

    let info = json_of(db, &["job", &failed.to_string()]);
    assert!(info["failed_at"].is_string(), "{info}");
    assert_eq!(info["finished_at"], Value::Null);
    let failed_at = table_time(&info["failed_at"]);
    let (out, _) = run(db, &["jobs", "--status", "failed"], None);
    let row = out.lines().nth(1).unwrap();
    assert!(row.contains(&failed_at), "AT shows when it failed: {out}");
    let (out, _) = run(db, &["job", &failed.to_string()], None);
    assert!(
        out.lines()
            .any(|l| l.starts_with("failed") && l.ends_with(&failed_at)),
        "{out}"
    );

    // A stored backtrace: the user's frames, the rest counted.
    let backtrace = "panicked at src/report.rs:3:9\\n   0: std::backtrace::Backtrace::capture\\n             at /rustc/x/library/std/src/backtrace.rs:296:9\\n   1: std::panicking::begin_panic_handler\\n   2: <myapp::Report as solidq::job::Job>::perform\\n             at ./src/report.rs:3:9\\n   3: solidq::worker::executor::run\\n             at ./src/worker/executor.rs:90:1\\n   4: __rust_try";
    let error = format!(r#"{{"kind":"panic","message":"boom","backtrace":"{backtrace}"}}"#);
    db.execute(&format!(
        "UPDATE solidq_jobs SET errors = {} WHERE id = {failed}",
        db.literal(&format!("[{error}]"))
    ));
    db.execute(&format!(
        "UPDATE solidq_failed_executions SET error = {} WHERE job_id = {failed}",
        db.literal(&error)
    ));
    let (out, _) = run(db, &["job", &failed.to_string()], None);
    assert!(out.contains("panicked at src/report.rs:3:9"), "{out}");
    assert!(
        out.contains("2: <myapp::Report as solidq::job::Job>::perform")
            && out.contains("at ./src/report.rs:3:9"),
        "{out}"
    );
    assert!(
        !out.contains("std::panicking") && !out.contains("executor.rs"),
        "{out}"
    );
    assert!(
        out.contains(
            "(4 frames of solidq, the standard library and the runtime hidden; --full shows them)"
        ),
        "{out}"
    );
    let (out, _) = run(db, &["job", &failed.to_string(), "--full"], None);
    assert!(
        out.contains("std::panicking::begin_panic_handler") && out.contains("executor.rs"),
        "{out}"
    );
    let json = json_of(db, &["job", &failed.to_string()]);
    assert!(
        json["error"]["backtrace"]
            .as_str()
            .unwrap()
            .contains("std::panicking"),
        "--json keeps every frame"
    );
}

/// Each path a job takes leaves a record that says what happened, read
/// back through `JobInfo` and the CLI: a succeeded job keeps its last
/// attempt's start (so its duration), and shows no earlier attempt's error
/// as its own; a failed and a retrying job show their start and error.
fn records_show_what_happened_on_each_path(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let slow = queue.enqueue(&Sleep { ms: 300 }).unwrap();
    let flaky = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 1,
            },
            EnqueueOptions::new()
                .max_attempts(3)
                .backoff(solidq::Backoff::fixed(Duration::from_millis(10))),
        )
        .unwrap();
    let failed = queue
        .enqueue(&Fail {
            message: "no such order".into(),
        })
        .unwrap();
    let retrying = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 9,
            },
            EnqueueOptions::new()
                .max_attempts(3)
                .backoff(solidq::Backoff::fixed(Duration::from_secs(3600))),
        )
        .unwrap();
    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads: 4,
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("every path to end", Duration::from_secs(30), || {
        let status = |id| queue.job(id).unwrap().status;
        status(slow) == JobStatus::Succeeded
            && status(flaky) == JobStatus::Succeeded
            && status(failed) == JobStatus::Failed
            && status(retrying) == JobStatus::Retrying
    });
    worker.stop().unwrap();

    let info = queue.job(slow).unwrap();
    let ran = info.finished_at.unwrap() - info.started_at.expect("a finished job keeps its start");
    assert!(
        ran >= chrono::Duration::milliseconds(300) && ran < chrono::Duration::seconds(10),
        "its duration is its run: {ran:?}"
    );
    let info = queue.job(flaky).unwrap();
    assert_eq!(info.attempts, 2, "{info:?}");
    assert!(info.started_at.is_some(), "{info:?}");
    assert_eq!(info.error, None, "a succeeded job shows no error: {info:?}");
    assert_eq!(info.errors.len(), 1, "the earlier attempt's error is kept");
    for id in [failed, retrying] {
        let info = queue.job(id).unwrap();
        assert!(info.started_at.is_some(), "{info:?}");
        assert!(info.error.is_some(), "{info:?}");
    }

    // The CLI says the same.
    let listed = json_of(db, &["jobs", "--limit", "10"]);
    for job in listed["jobs"].as_array().unwrap() {
        let id = job["id"].as_i64().unwrap();
        let has_error = !job["error"].is_null();
        assert_eq!(
            has_error,
            id == failed || id == retrying,
            "job {id}: the error is shown only where the state comes from it: {job}"
        );
        assert!(!job["started_at"].is_null(), "job {id}: {job}");
    }
    let (table, _) = run(db, &["jobs", "--status", "succeeded"], Some(200));
    assert!(!table.contains("attempt 1 failed"), "{table}");
    let (detail, _) = run(db, &["job", &flaky.to_string()], None);
    assert!(detail.contains("earlier error"), "{detail}");
    assert!(
        !detail.lines().any(|l| l.starts_with("error ")),
        "not shown as the job's error: {detail}"
    );
    let (detail, _) = run(db, &["job", &slow.to_string()], None);
    let started = detail
        .lines()
        .find(|l| l.starts_with("started"))
        .unwrap_or_default();
    assert!(started.contains(':'), "a time, not '-': {detail}");
}

/// `Queue::queues` and `solidq queues` list every queue with jobs in any
/// state (drained ones too), paused, or named by a registered worker, with
/// workflow members waiting for their parents counted.
fn every_queue_is_listed_with_its_waiting_jobs(db: &TestDb) {
    let queue = db.queue();
    for name in ["mail", "slow"] {
        queue
            .enqueue_with(
                &Echo { value: json!(name) },
                EnqueueOptions::new().queue(name),
            )
            .unwrap();
    }
    let drained = common::jobs::worker(queue.clone())
        .queues(["mail", "slow"])
        .drain()
        .unwrap();
    assert_eq!(drained.succeeded, 2, "{drained:?}");
    let on = || EnqueueOptions::new().queue("flows");
    let jobs = vec![
        solidq::JobRequest::new(&Echo { value: json!(1) }, on())
            .unwrap()
            .named("a"),
        solidq::JobRequest::new(&Echo { value: json!(2) }, on())
            .unwrap()
            .named("b")
            .after("a"),
    ];
    queue.batch(solidq::BatchOptions::new(), &jobs).unwrap();
    // A worker naming a queue that has no job yet (and a pattern, which
    // names no queue).
    let worker = common::jobs::worker(queue.clone())
        .queues(["reports", "archive*"])
        .start()
        .unwrap();
    let names = |queues: &[solidq::QueueStats]| -> Vec<String> {
        queues.iter().map(|q| q.name.clone()).collect()
    };
    let listed = queue.queues().unwrap();
    worker.stop().unwrap();
    assert_eq!(names(&listed), ["flows", "mail", "reports", "slow"]);
    let flows = &listed[0];
    assert_eq!((flows.ready, flows.waiting), (1, 1), "{flows:?}");

    let document = json_of(db, &["queues"]);
    let cli: Vec<(String, u64)> = document["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["name"].as_str().unwrap().to_string(),
                q["waiting"].as_u64().unwrap(),
            )
        })
        .collect();
    // The worker deregistered: its queue is no longer named.
    assert_eq!(
        cli,
        [
            ("flows".to_string(), 1),
            ("mail".to_string(), 0),
            ("slow".to_string(), 0)
        ]
    );
    let (table, _) = run(db, &["queues"], Some(200));
    assert!(table.lines().next().unwrap().contains("WAITING"), "{table}");
}
