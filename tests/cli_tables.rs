//! What operators read (issue 12, items 12–13), on both backends: tables
//! that fit 80 and 60 columns without splitting an id or a time, no
//! trailing padding; `jobs` says how many there are and pages; search by
//! argument and error text; failed jobs show when they failed; a panic's
//! backtrace shows the user's frames first.

#[macro_use]
mod common;

use std::process::Command;
use std::time::Duration;

use common::jobs::{Echo, Fail, Panic};
use common::{TestDb, wait_for};
use serde_json::{Value, json};
use solidq::{EnqueueOptions, JobStatus, Queue, WorkerConfig};

backend_tests!(
    tables_fit_the_width_and_jobs_pages,
    jobs_are_found_by_argument_and_error_text,
    failed_jobs_show_when_they_failed_and_user_frames_first,
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
