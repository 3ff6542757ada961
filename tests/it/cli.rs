//! The operator CLI against a database holding jobs in every state, on
//! both backends: each command's table and `--json` document, and bad
//! arguments giving one line, the documented exit code, and no writes.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::jobs::{Echo, Fail, Flaky, LimitedDiscard, LimitedOne, Panic, Sleep};
use common::{TestDb, wait_for};
use serde_json::{Value, json};
use solidq::{
    EnqueueOptions, JobStatus, Queue, RecurringTask, Scheduler, WorkerConfig, WorkerHandle,
};

backend_tests!(
    listings_show_every_state_as_tables_and_json,
    actions_change_what_they_say_and_report_counts,
    bad_arguments_get_one_line_and_write_nothing,
);

/// Runs `solidq args…` on `db`; returns (exit code, stdout, stderr).
fn solidq(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    common::run_cli(db, args)
}

/// `solidq args… --json`, parsed; panics unless it exits 0.
fn json_of(db: &TestDb, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = solidq(db, &args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

/// `solidq args…` as a table; panics unless it exits 0.
fn table_of(db: &TestDb, args: &[&str]) -> String {
    let (code, out, err) = solidq(db, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

/// Ids of the jobs a `jobs --json` document lists.
fn ids(document: &Value) -> Vec<i64> {
    document["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

/// Jobs in every state; the worker keeps one running.
struct Seeded {
    worker: WorkerHandle,
    ids: Vec<(JobStatus, i64)>,
}

fn seed(db: &TestDb) -> Seeded {
    db.create_ledger();
    let queue = db.queue();
    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads: 4,
            queues: vec!["work".into()],
            shutdown_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    let on_work = || EnqueueOptions::new().queue("work");
    let succeeded = queue
        .enqueue_with(
            &Echo {
                value: json!("done"),
            },
            on_work(),
        )
        .unwrap();
    let failed = queue
        .enqueue_with(
            &Panic {
                message: "boom".into(),
            },
            on_work(),
        )
        .unwrap();
    let failed_too = queue
        .enqueue_with(
            &Fail {
                message: "nope".into(),
            },
            on_work(),
        )
        .unwrap();
    let retrying = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 1,
            },
            on_work(),
        )
        .unwrap();
    let running = queue
        .enqueue_with(&Sleep { ms: 60_000 }, on_work())
        .unwrap();
    let limited = |n| LimitedOne {
        url: db.url.clone(),
        n,
        sleep_ms: 0,
        key: "cli".into(),
    };
    // Holders on a queue no worker claims keep the slots.
    let elsewhere = || EnqueueOptions::new().queue("idle");
    let ready = queue.enqueue_with(&limited(1), elsewhere()).unwrap();
    let blocked = queue.enqueue_with(&limited(2), elsewhere()).unwrap();
    let discard = |n| LimitedDiscard {
        url: db.url.clone(),
        n,
        sleep_ms: 0,
        key: "cli".into(),
    };
    let ready_too = queue.enqueue_with(&discard(1), elsewhere()).unwrap();
    let discarded = queue.enqueue_with(&discard(2), elsewhere()).unwrap();
    let scheduled = queue
        .enqueue_with(
            &Echo { value: json!(1) },
            elsewhere().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    wait_for(
        "the worker's jobs to settle",
        Duration::from_secs(30),
        || {
            let status = |id| queue.job(id).unwrap().status;
            status(succeeded) == JobStatus::Succeeded
                && status(failed) == JobStatus::Failed
                && status(failed_too) == JobStatus::Failed
                && status(retrying) == JobStatus::Retrying
                && status(running) == JobStatus::Running
        },
    );
    Seeded {
        worker,
        ids: vec![
            (JobStatus::Succeeded, succeeded),
            (JobStatus::Failed, failed),
            (JobStatus::Failed, failed_too),
            (JobStatus::Retrying, retrying),
            (JobStatus::Running, running),
            (JobStatus::Ready, ready),
            (JobStatus::Blocked, blocked),
            (JobStatus::Ready, ready_too),
            (JobStatus::Discarded, discarded),
            (JobStatus::Scheduled, scheduled),
        ],
    }
}

fn listings_show_every_state_as_tables_and_json(db: &TestDb) {
    let seeded = seed(db);
    let queue = db.queue();

    // jobs, by status, as JSON and as a table.
    for status in JobStatus::ALL {
        let expected: Vec<i64> = seeded
            .ids
            .iter()
            .rev()
            .filter(|(s, _)| *s == status)
            .map(|&(_, id)| id)
            .collect();
        let listed = ids(&json_of(db, &["jobs", "--status", status.as_str()]));
        assert_eq!(listed, expected, "jobs --status {status}");
    }
    let all = json_of(db, &["jobs"]);
    assert_eq!(ids(&all).len(), 10, "every job, newest first: {all}");
    assert_eq!(
        ids(&json_of(db, &["jobs", "--queue", "work", "--limit", "2"])).len(),
        2
    );
    assert_eq!(
        ids(&json_of(db, &["jobs", "--kind", "panic"])),
        [seeded.ids[1].1]
    );
    assert_eq!(ids(&json_of(db, &["jobs", "--since", "1h"])).len(), 10);
    assert!(ids(&json_of(db, &["jobs", "--since", "2999-01-01T00:00:00Z"])).is_empty());
    let table = table_of(db, &["jobs", "--status", "failed"]);
    let header = table.lines().next().unwrap();
    for column in ["ID", "KIND", "QUEUE", "STATUS", "TRIES", "AT", "ERROR"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(table.contains("panic") && table.contains("boom"), "{table}");

    // job: every field, the error and its backtrace.
    let failed = seeded.ids[1].1;
    let info = json_of(db, &["job", &failed.to_string()]);
    assert_eq!(info["status"], "failed");
    assert_eq!(info["kind"], "panic");
    assert_eq!(info["error"]["kind"], "panic");
    assert!(info["error"]["backtrace"].is_string(), "{info}");
    let table = table_of(db, &["job", &failed.to_string()]);
    for field in [
        "status",
        "attempts",
        "arguments",
        "error",
        "backtrace",
        "boom",
    ] {
        assert!(table.contains(field), "{field} missing from {table}");
    }
    let retrying = seeded.ids[3].1;
    let info = json_of(db, &["job", &retrying.to_string()]);
    assert_eq!(info["status"], "retrying");
    assert!(info["retry_at"].is_string());

    // queues: counts by state.
    let queues = json_of(db, &["queues"]);
    let find = |name: &str| {
        queues["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("no queue {name}: {queues}"))
            .clone()
    };
    let work = find("work");
    assert_eq!(
        (
            &work["running"],
            &work["claimed"],
            &work["failed"],
            &work["retrying"],
            &work["scheduled"],
            &work["paused"]
        ),
        (
            &json!(1),
            &json!(0),
            &json!(2),
            &json!(1),
            &json!(0),
            &json!(false)
        ),
        "{work}"
    );
    // Every count is what `jobs --status S --queue Q` lists.
    for q in queues["queues"].as_array().unwrap() {
        let name = q["name"].as_str().unwrap();
        for status in JobStatus::ALL {
            let Some(count) = q.get(status.as_str()) else {
                continue;
            };
            let listed = ids(&json_of(
                db,
                &["jobs", "--status", status.as_str(), "--queue", name],
            ));
            assert_eq!(
                count.as_u64().unwrap(),
                listed.len() as u64,
                "queue {name}, {status}: {q}"
            );
        }
    }
    let idle = find("idle");
    assert_eq!(
        (&idle["ready"], &idle["blocked"], &idle["scheduled"]),
        (&json!(2), &json!(1), &json!(1)),
        "{idle}"
    );
    assert!(idle["latency_ms"].is_u64());
    let table = table_of(db, &["queues"]);
    assert!(table.lines().next().unwrap().contains("CLAIMED"), "{table}");
    assert!(table.contains("idle") && table.contains("work"), "{table}");

    // processes: the worker and the job it holds.
    let processes = json_of(db, &["processes"]);
    let worker = processes["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "worker")
        .unwrap_or_else(|| panic!("no worker: {processes}"))
        .clone();
    assert_eq!(worker["jobs"], json!([seeded.ids[4].1]), "{worker}");
    assert_eq!(worker["pid"], json!(std::process::id()));
    assert!(worker["heartbeat_age_ms"].is_u64());
    let table = table_of(db, &["processes"]);
    assert!(
        table.contains("worker") && table.contains(" ago"),
        "{table}"
    );

    seeded.worker.stop().unwrap();
    drop(queue);
}

fn actions_change_what_they_say_and_report_counts(db: &TestDb) {
    let seeded = seed(db);
    seeded.worker.stop().unwrap();
    let queue: Queue = db.queue();

    // pause / resume
    let paused = json_of(db, &["pause", "idle"]);
    assert_eq!(
        paused,
        json!({ "queue": "idle", "paused": true, "changed": true })
    );
    assert!(queue.queue_stats("idle").unwrap().paused);
    // Paused already: nothing changed, exit 1 (issue 26 item 3).
    let (code, _, err) = solidq(db, &["pause", "idle"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already"), "{err}");
    assert_eq!(json_of(db, &["resume", "idle"])["changed"], true);
    assert!(!queue.queue_stats("idle").unwrap().paused);

    // enqueue by kind, with every option (a queue new to the database
    // needs --force once)
    let enqueued = json_of(
        db,
        &[
            "enqueue",
            "echo",
            "--args",
            r#"{"value": 5}"#,
            "--queue",
            "cli",
            "--priority",
            "-2",
            "--delay",
            "1h",
            "--unique-key",
            "cli-1",
            "--force",
        ],
    );
    assert_eq!(enqueued["status"], "scheduled");
    let id = enqueued["id"].as_i64().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!(
        (
            info.queue.as_str(),
            info.priority,
            info.unique_key.as_deref()
        ),
        ("cli", -2, Some("cli-1"))
    );
    assert_eq!(info.arguments, json!({ "value": 5 }));
    let by_key = json_of(db, &["job", "--unique-key", "cli-1"]);
    assert_eq!(by_key["id"], json!(id), "{by_key}");
    let (code, _, err) = solidq(db, &["enqueue", "echo", "--unique-key", "cli-1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("(job {id})")), "{err}");
    let at = json_of(db, &["enqueue", "echo", "--at", "2099-01-01T00:00:00Z"]);
    let info = queue.job(at["id"].as_i64().unwrap()).unwrap();
    assert_eq!(info.scheduled_at.to_rfc3339(), "2099-01-01T00:00:00+00:00");

    // failed retry / discard
    let failed: Vec<i64> = seeded
        .ids
        .iter()
        .filter(|(s, _)| *s == JobStatus::Failed)
        .map(|&(_, id)| id)
        .collect();
    assert_eq!(
        json_of(db, &["failed", "retry", &failed[0].to_string()]),
        json!({ "retried": 1 })
    );
    assert_eq!(queue.job(failed[0]).unwrap().status, JobStatus::Ready);
    assert_eq!(
        json_of(db, &["failed", "discard", "--kind", "fail"]),
        json!({ "discarded": 1 })
    );
    assert!(queue.job(failed[1]).is_err());
    // Nothing matched: the counts on stdout with --json, exit 1 (issue 26
    // item 3: an action that changed nothing says so).
    let (code, out, err) = solidq(db, &["failed", "retry", "--queue", "idle", "--json"]);
    assert_eq!(code, 1, "no failed job on idle: {err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({ "retried": 0 })
    );
    let (code, out, err) = solidq(db, &["failed", "retry", "--all"]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("nothing to retry: no failed job matches"),
        "{err}"
    );

    // clear-finished
    let (code, out, err) = solidq(db, &["clear-finished", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({ "deleted": 0 })
    );
    let deleted = json_of(db, &["clear-finished", "--older-than", "0s"]);
    assert_eq!(
        deleted,
        json!({ "deleted": 2 }),
        "the succeeded and the discarded job"
    );

    // recurring: list, run now
    Scheduler::new(queue.clone())
        .task(
            RecurringTask::new("yearly", "0 0 1 1 *", &Echo { value: json!("y") })
                .unwrap()
                .description("new year"),
        )
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let tasks = json_of(db, &["recurring"]);
    let task = &tasks["tasks"][0];
    assert_eq!(
        (&task["key"], &task["schedule"], &task["last_run_at"]),
        (&json!("yearly"), &json!("0 0 1 1 *"), &Value::Null)
    );
    assert!(
        task["next_run_at"]
            .as_str()
            .unwrap()
            .contains("-01-01T00:00:00"),
        "{task}"
    );
    let run = json_of(db, &["recurring", "run", "yearly"]);
    let job = run["job_id"].as_i64().unwrap();
    assert_eq!(queue.job(job).unwrap().kind, "echo");
    let tasks = json_of(db, &["recurring"]);
    assert_eq!(tasks["tasks"][0]["last_job_id"], json!(job));
    let table = table_of(db, &["recurring"]);
    assert!(
        table.contains("yearly") && table.contains("NEXT RUN"),
        "{table}"
    );
}

fn bad_arguments_get_one_line_and_write_nothing(db: &TestDb) {
    let queue = db.queue();
    queue.enqueue(&Echo { value: json!(1) }).unwrap();
    let jobs_before = db.count("solidq_jobs");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["enqueue", "echo", "--args", "{not json"],
            2,
            "not JSON",
        ),
        (vec!["enqueue", "echo", "--queue", "a b"], 2, "queue name"),
        (vec!["enqueue", "echo", "--delay", "soon"], 2, "--delay"),
        (vec!["enqueue", "echo", "--at", "tomorrow"], 2, "RFC 3339"),
        (vec!["jobs", "--status", "sleepy"], 2, "possible values"),
        (vec!["jobs", "--limit", "many"], 2, "--limit"),
        (vec!["job", "999999"], 1, "job 999999 not found"),
        (vec!["job", "--unique-key", "nobody"], 1, "not found"),
        (vec!["failed", "retry"], 2, "required"),
        (
            vec!["failed", "discard", "1", "--all"],
            2,
            "cannot be used with",
        ),
        // Nothing matched (issue 26 item 3: it was 2).
        (vec!["recurring", "run", "nothing"], 1, "no such task"),
        (vec!["pause", "bad queue!"], 2, "queue name"),
        (vec!["frobnicate"], 2, "unrecognized subcommand"),
    ];
    for (args, code, expected) in cases {
        let (exit, out, err) = solidq(db, &args);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line, got {err:?}");
        assert!(lines[0].starts_with("solidq: "), "{args:?}: {err}");
        assert!(
            lines[0].contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
        assert_eq!(exit, code, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed {out}");
    }
    assert_eq!(db.count("solidq_jobs"), jobs_before, "nothing was written");

    // An unreachable database: exit 1, the password hidden.
    let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args([
            "queues",
            "--database-url",
            "postgres://ops:hunter2@127.0.0.1:1/db",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("postgres://ops:***@127.0.0.1:1/db"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // A SQLite file that cannot be created: exit 1, one line naming it.
    let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["queues", "--database-url", "/nonexistent-dir/jobs.db"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent-dir/jobs.db"), "{err}");
    // Arguments over SOLIDQ_MAX_PAYLOAD_BYTES (QueueConfig::from_env):
    // a usage error naming the size and the limit, nothing written; a bad
    // value of the variable names it.
    let args = format!("{{\"value\":\"{}\"}}", "x".repeat(2000));
    let size = args.len();
    for (limit, code, expected) in [
        (
            "1000",
            2,
            format!("take {size} bytes, over the limit of 1000 bytes"),
        ),
        ("0", 2, "SOLIDQ_MAX_PAYLOAD_BYTES".to_string()),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
            .args(["enqueue", "echo", "--args", &args])
            .env("SOLIDQ_DATABASE_URL", &db.url)
            .env("SOLIDQ_MAX_PAYLOAD_BYTES", limit)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&expected), "expected {expected:?} in {err}");
    }
    assert_eq!(db.count("solidq_jobs"), jobs_before, "nothing was written");
    // No database at all: a usage error.
    let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["queues"])
        .env_remove("SOLIDQ_DATABASE_URL")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no database"));
}
