//! Every log line of a supervisor and its worker processes, which share
//! one stderr, names the process that wrote it (kind and name once it has
//! registered, its pid always), and their "received SIGTERM" lines differ;
//! with `SOLIDQ_LOG_FORMAT=json` every line is one JSON object with those
//! fields. Real processes: `solidq supervisor` and this test binary as its
//! workers, logging through `solidq::logging`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use common::child::Child;
use common::{TestDb, wait_for};

/// The worker processes the supervisor spawns here: a `work` binary as a
/// user would write it, with `solidq::logging::init`.
#[test]
#[ignore = "entry point of the worker processes the logging tests spawn"]
fn logging_child() {
    if std::env::var("SOLIDQ_TEST_LOGGING_CHILD").is_err() {
        return;
    }
    solidq::logging::init();
    common::jobs::register(solidq::Worker::from_env().expect("worker from env"))
        .run()
        .expect("worker run");
}

fn worker_command() -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary");
    [
        exe.to_str().expect("utf-8 path"),
        "--exact",
        "logging::logging_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs a supervisor with two worker processes until they have
/// registered, stops it with SIGTERM, and returns its stderr, its pid and
/// its workers' pids.
fn supervise_and_stop(db: &TestDb, format: &str) -> (String, u32, Vec<u32>) {
    db.queue(); // migrated
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!(
            r#"
database_url = "{url}"
heartbeat_interval = "200ms"
shutdown_timeout = "2s"

[[workers]]
command = {command:?}
processes = 2
threads = 2
polling_interval = "50ms"
env = {{ SOLIDQ_TEST_LOGGING_CHILD = "1" }}
"#,
            url = db.url,
            command = worker_command(),
        ),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_solidq"));
    command
        .args(["supervisor", "--config"])
        .arg(config.path())
        .env("RUST_LOG", "info")
        .env("SOLIDQ_LOG_FORMAT", format)
        .env_remove("SOLIDQ_DATABASE_URL");
    let mut supervisor = Child::spawn(command);
    let workers = || -> Vec<u32> {
        db.column_of(&format!(
            "SELECT {} AS v FROM solidq_processes WHERE kind = 'worker'",
            db.bigint("pid")
        ))
        .into_iter()
        .map(|pid| pid as u32)
        .collect()
    };
    wait_for("two workers to register", Duration::from_secs(30), || {
        workers().len() == 2
    });
    let pids = workers();
    // A worker's row is committed a moment before the worker takes its
    // name for its log lines (CI once sent SIGTERM in between, on MySQL,
    // and the worker's SIGTERM line named only its pid); its "started"
    // line comes after.
    wait_for(
        "each worker to log that it started",
        Duration::from_secs(30),
        || {
            let logs = supervisor.logs();
            pids.iter()
                .all(|pid| logs.contains(&format!("pid {pid}) started")))
        },
    );
    supervisor.signal(libc::SIGTERM);
    let status = supervisor
        .wait_timeout(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("supervisor did not stop:\n{}", supervisor.logs()));
    let logs = supervisor.logs();
    assert!(status.success(), "exit {status:?}:\n{logs}");
    (logs, supervisor.pid(), pids)
}

backend_tests!(
    every_text_line_names_its_process_and_each_sigterm_line_differs,
    every_json_line_is_an_object_naming_its_process
);

fn every_text_line_names_its_process_and_each_sigterm_line_differs(db: &TestDb) {
    let (logs, supervisor, workers) = supervise_and_stop(db, "text");
    let kind_of: BTreeMap<u32, &str> = workers
        .iter()
        .map(|&pid| (pid, "worker"))
        .chain([(supervisor, "supervisor")])
        .collect();
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 6, "too few lines:\n{logs}");
    for line in &lines {
        let (&pid, kind) = kind_of
            .iter()
            .find(|(pid, _)| line.contains(&format!(" pid={pid} ")))
            .unwrap_or_else(|| panic!("a line naming no known process:\n{line}\nin:\n{logs}"));
        // After the pid: the thread, the target, the message. Before it:
        // the time, the level, and the process's kind and name once it
        // registered.
        let before = line.split(&format!(" pid={pid} ")).next().unwrap();
        let named = before.split_whitespace().skip(2).collect::<Vec<_>>();
        if !named.is_empty() {
            assert_eq!(named[0], *kind, "pid {pid} is a {kind}: {line}");
            assert!(named[1].starts_with(&format!("{kind}-")), "{line}");
        }
    }
    let sigterms: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("received SIGTERM"))
        .collect();
    assert_eq!(sigterms.len(), 3, "supervisor and two workers:\n{logs}");
    // The messages themselves differ (a logger of the user's own shows
    // who speaks too), and each names its process.
    let messages: BTreeSet<&str> = sigterms
        .iter()
        .map(|l| l.split_once(": ").expect("target: message").1)
        .collect();
    assert_eq!(messages.len(), 3, "{sigterms:#?}");
    for (pid, kind) in &kind_of {
        assert_eq!(
            sigterms
                .iter()
                .filter(|l| l.contains(&format!("{kind} {kind}-"))
                    && l.contains(&format!("(pid {pid}) received SIGTERM")))
                .count(),
            1,
            "one SIGTERM line of {kind} {pid}: {sigterms:#?}"
        );
    }
}

fn every_json_line_is_an_object_naming_its_process(db: &TestDb) {
    let (logs, supervisor, workers) = supervise_and_stop(db, "json");
    let mut sigterms = Vec::new();
    let mut lines = 0;
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\nin:\n{logs}"));
        for field in ["timestamp", "level", "target", "thread", "message"] {
            assert!(value[field].is_string(), "{field} in {line}");
        }
        chrono::DateTime::parse_from_rfc3339(value["timestamp"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("timestamp ({e}): {line}"));
        let pid = value["pid"].as_u64().expect("pid") as u32;
        let kind = if pid == supervisor {
            "supervisor"
        } else {
            assert!(workers.contains(&pid), "pid {pid} of no process: {line}");
            "worker"
        };
        // null only before the process registered.
        assert!(
            value["process_kind"].is_null() || value["process_kind"] == kind,
            "{line}"
        );
        assert_eq!(
            value["process_kind"].is_null(),
            value["process_name"].is_null(),
            "{line}"
        );
        if value["message"]
            .as_str()
            .unwrap()
            .contains("received SIGTERM")
        {
            sigterms.push(value);
        }
    }
    assert!(lines >= 6, "too few lines:\n{logs}");
    assert_eq!(sigterms.len(), 3, "supervisor and two workers:\n{logs}");
    let speakers: BTreeSet<(u64, String, String)> = sigterms
        .iter()
        .map(|v| {
            (
                v["pid"].as_u64().unwrap(),
                v["process_kind"].as_str().expect("registered").to_string(),
                v["process_name"].as_str().expect("registered").to_string(),
            )
        })
        .collect();
    assert_eq!(speakers.len(), 3, "{sigterms:#?}");
    let kinds: Vec<&str> = speakers.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "worker").count(),
        2,
        "{kinds:?}"
    );
}
