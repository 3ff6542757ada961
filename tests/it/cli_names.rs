//! Typos do not pass silently (issue 12, items 9–11), on both backends: a
//! queue, kind or failed job id nothing knows of is refused with what
//! exists (or only warned about when there is nothing to compare against);
//! `check` refuses recurring tasks and worker queues nothing serves; only
//! `migrate` creates a database file; `migrate` finds the database as
//! every other command does.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::TestDb;
use common::jobs::Echo;
use serde_json::{Value, json};
use solidq::{EnqueueOptions, WorkerConfig};

backend_tests!(
    typos_are_refused_naming_what_exists,
    check_refuses_names_that_nothing_serves,
    only_migrate_creates_a_database_and_it_reads_the_config,
    names_known_from_jobs_statistics_and_tasks_are_checked_without_workers,
);

fn run(dir: &Path, url: Option<&str>, args: &[&str]) -> (i32, String, String) {
    common::run_cli_in(dir, url, args)
}

fn solidq(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    common::run_cli(db, args)
}

/// Asserts `args` exits 1 with one line on stderr containing every one of
/// `expected`, and prints nothing on stdout.
fn refused(db: &TestDb, args: &[&str], expected: &[&str]) {
    let (code, out, err) = solidq(db, args);
    assert_eq!(code, 1, "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
    for text in expected {
        assert!(err.contains(text), "{args:?}: expected {text:?} in {err}");
    }
    assert!(out.is_empty(), "{args:?} printed {out}");
}

/// Asserts `args` exits 0 with a warning containing `warning`.
fn warned(db: &TestDb, args: &[&str], warning: &str) {
    let (code, _, err) = solidq(db, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    assert!(
        err.contains("solidq: warning: ") && err.contains(warning),
        "{args:?}: expected a warning with {warning:?}, got {err:?}"
    );
}

fn paused(db: &TestDb, queue: &str) -> bool {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_pauses WHERE queue_name = '{queue}'"
    )) == 1
}

fn typos_are_refused_naming_what_exists(db: &TestDb) {
    let queue = db.queue();
    // Nothing to compare against yet: a warning, and the command goes on.
    warned(db, &["pause", "mial"], "cannot check queue \"mial\"");
    assert!(paused(db, "mial"));
    warned(db, &["enqueue", "echo"], "cannot check kind \"echo\"");
    assert_eq!(db.count("solidq_jobs"), 1);

    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            queues: vec!["mail".into(), "default".into()],
            shutdown_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    // The worker recorded the kinds it runs in its process row.
    let (_, out, _) = solidq(db, &["processes", "--json"]);
    let processes: Value = serde_json::from_str(&out).unwrap();
    let kinds = &processes["processes"][0]["metadata"]["kinds"];
    assert!(
        kinds.as_array().unwrap().contains(&json!("echo")),
        "{processes}"
    );
    queue
        .enqueue_with(
            &Echo { value: json!(1) },
            EnqueueOptions::new().queue("mail"),
        )
        .unwrap();

    // Queues: refused with the known ones, --force goes ahead.
    refused(
        db,
        &["pause", "maill"],
        &[
            "unknown queue \"maill\"",
            "known queues: default, mail, mial",
            "--force",
        ],
    );
    assert!(!paused(db, "maill"), "a refused pause wrote nothing");
    refused(db, &["resume", "maill"], &["unknown queue \"maill\""]);
    warned(
        db,
        &["pause", "maill", "--force"],
        "unknown queue \"maill\"",
    );
    assert!(paused(db, "maill"));
    let (code, out, err) = solidq(db, &["resume", "maill"]);
    assert_eq!((code, err.as_str()), (0, ""), "a paused queue is known");
    assert!(out.contains("queue maill resumed"), "{out}");

    // Kinds and queues of enqueue: against the registered worker.
    let jobs = db.count("solidq_jobs");
    refused(
        db,
        &["enqueue", "no_such_kind"],
        &[
            "unknown kind \"no_such_kind\"",
            "known kinds: ",
            "echo",
            "--force",
        ],
    );
    refused(
        db,
        &["enqueue", "echo", "--queue", "mial"],
        &[
            "unknown queue \"mial\"",
            "no registered worker claims from it (their queues: default, mail)",
        ],
    );
    assert_eq!(
        db.count("solidq_jobs"),
        jobs,
        "refused enqueues wrote nothing"
    );
    let (code, out, err) = solidq(db, &["enqueue", "no_such_kind", "--force", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: unknown kind"), "{err}");
    let forced: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        queue.job(forced["id"].as_i64().unwrap()).unwrap().kind,
        "no_such_kind"
    );
    let (code, _, err) = solidq(db, &["enqueue", "echo", "--queue", "mail"]);
    assert_eq!(
        (code, err.as_str()),
        (0, ""),
        "a registered kind on a served queue"
    );

    // failed retry|discard: ids that are not failed, filters that match
    // no kind or queue at all.
    // A job on a queue no worker claims stays ready.
    let not_failed = queue
        .enqueue_with(
            &Echo { value: json!(2) },
            EnqueueOptions::new().queue("idle"),
        )
        .unwrap();
    refused(
        db,
        &["failed", "retry", "999999"],
        &["job 999999 not found"],
    );
    refused(
        db,
        &["failed", "discard", "999999", &not_failed.to_string()],
        &["not found"],
    );
    refused(
        db,
        &["failed", "retry", &not_failed.to_string()],
        &[&format!("job {not_failed} is ready, not failed")],
    );
    assert!(queue.job(not_failed).is_ok(), "nothing was discarded");
    refused(
        db,
        &["failed", "retry", "--kind", "ecoh"],
        &["unknown kind \"ecoh\"", "known kinds: ", "no_such_kind"],
    );
    refused(
        db,
        &["failed", "discard", "--queue", "nowhere"],
        &["unknown queue \"nowhere\""],
    );
    // A registered kind with no failed job: not refused as a typo, but
    // nothing to retry (exit 1, issue 26 item 3), the count on stdout.
    let (code, out, err) = solidq(db, &["failed", "retry", "--kind", "sleep", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing to retry"), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({ "retried": 0 })
    );
    worker.stop().unwrap();
}

fn check_refuses_names_that_nothing_serves(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("solidq.toml");
    let write = |worker_queues: &str, kind: &str, task_queue: &str| {
        std::fs::write(
            &path,
            format!(
                "database_url = \"{}\"\n[[workers]]\ncommand = [\"/bin/true\"]\nqueues = {worker_queues}\n\
                 [recurring.nightly]\nkind = \"{kind}\"\nschedule = \"0 0 1 1 *\"\nqueue = \"{task_queue}\"\n",
                db.url
            ),
        )
        .unwrap();
    };
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        run(dir.path(), None, &args)
    };

    // No worker ever registered, no job: the kind and the worker queues
    // cannot be checked (warnings); the file itself shows that no group
    // claims the task's queue.
    write(r#"["mail", "mial"]"#, "echo_typo", "reports");
    let (code, out, err) = check(&[]);
    assert_eq!(code, 1, "{out}{err}");
    // The notes are left out of a refusal they have nothing to do with
    // (issue 26 item 3): stderr is the refusal alone.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        out.contains(
            "error: recurring task \"nightly\" enqueues to queue \"reports\", which no [[workers]] group claims from"
        ),
        "{out}"
    );
    assert!(
        !out.contains("which no job was ever on"),
        "no job to compare with: {out}"
    );
    assert!(
        err.ends_with("1 problem listed above; --force to accept them\n"),
        "{err}"
    );
    // With --force the file passes, and the notes are said.
    let (code, out, err) = check(&["--force"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("cannot check the kind \"echo_typo\""), "{err}");
    assert!(
        err.contains("cannot check queue \"mial\" of workers[0]"),
        "{err}"
    );

    // With a registered worker and jobs: every name is checked.
    let worker = common::jobs::worker(queue.clone())
        .config(WorkerConfig {
            queues: vec!["mail".into()],
            shutdown_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    queue
        .enqueue_with(
            &Echo { value: json!(1) },
            EnqueueOptions::new().queue("mail"),
        )
        .unwrap();
    let (code, out, err) = check(&[]);
    assert_eq!(code, 1, "{out}{err}");
    for problem in [
        "error: recurring task \"nightly\" enqueues kind \"echo_typo\", which no registered worker runs (registered kinds: ",
        "error: recurring task \"nightly\" enqueues to queue \"reports\"",
        "error: workers[0] claims from queue \"mial\", which no job was ever on (known queues: mail)",
    ] {
        assert!(out.contains(problem), "expected {problem:?} in {out}");
    }
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("3 problems listed above"), "{err}");
    assert!(!out.contains(": ok ("), "{out}");

    // --force accepts them as warnings.
    let (code, out, err) = check(&["--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.matches("warning: ").count() >= 3, "{out}");
    assert!(out.contains(": ok ("), "{out}");

    // Names that exist pass.
    write(r#"["mail"]"#, "echo", "mail");
    let (code, out, err) = check(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("error") && !out.contains("warning"), "{out}");
    assert!(out.contains(": ok ("), "{out}");
    worker.stop().unwrap();
}

fn only_migrate_creates_a_database_and_it_reads_the_config(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("ordrs.sqlite3");
    let typo_url = typo.to_str().unwrap();
    for args in [
        vec!["queues"],
        vec!["jobs"],
        vec!["enqueue", "echo"],
        vec!["pause", "mail"],
        vec!["failed", "retry", "--all"],
    ] {
        let (code, out, err) = run(dir.path(), Some(typo_url), &args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(&format!("no such database file {typo_url}")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("run `solidq migrate"), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(!typo.exists(), "{args:?} created {typo_url}");
    }
    let (code, _, err) = run(dir.path(), Some(typo_url), &["migrate"]);
    assert_eq!(code, 0, "{err}");
    assert!(typo.exists(), "migrate creates the file");

    // migrate finds the database like every command: ./solidq.toml, then
    // --config (the test's database is not migrated yet).
    std::fs::write(
        dir.path().join("solidq.toml"),
        format!("database_url = \"{}\"\n", db.url),
    )
    .unwrap();
    let (code, out, err) = run(dir.path(), None, &["migrate"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": applied "), "{out}");
    let (code, out, err) = run(dir.path(), None, &["queues", "--json"]);
    assert_eq!((code, out.trim()), (0, "{\n  \"queues\": []\n}"), "{err}");
    let elsewhere = tempfile::tempdir().unwrap();
    let config = dir.path().join("solidq.toml");
    let (code, out, err) = run(
        elsewhere.path(),
        None,
        &["migrate", "--config", config.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": up to date"), "{out}");
    let (code, _, err) = run(elsewhere.path(), None, &["migrate"]);
    assert_eq!(code, 2, "no database named anywhere: {err}");
    assert!(err.contains("no database"), "{err}");
}

/// Issue 26 item 3: with no worker registered, the kinds and queues of
/// jobs (in any state, or counted once in the job statistics) and of
/// recurring tasks are still known, so a typo is refused instead of only
/// warned about.
fn names_known_from_jobs_statistics_and_tasks_are_checked_without_workers(db: &TestDb) {
    let queue = db.queue();
    queue
        .enqueue_with(
            &Echo { value: json!(1) },
            EnqueueOptions::new().delay(Duration::from_secs(3600)),
        )
        .unwrap();
    // A queue and kind drained long ago: only the statistics remember them.
    db.execute(
        "INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
         VALUES (CURRENT_TIMESTAMP, 'reports', 'nightly_report', 'succeeded', 3, 0, 0)",
    );
    assert_eq!(db.count("solidq_processes"), 0, "no worker");
    let jobs = db.count("solidq_jobs");
    refused(
        db,
        &["enqueue", "ecoh"],
        &[
            "unknown kind \"ecoh\"",
            "known kinds: echo, nightly_report",
            "--force",
        ],
    );
    refused(
        db,
        &["enqueue", "nightly_reprot", "--queue", "reports"],
        &["unknown kind \"nightly_reprot\""],
    );
    refused(
        db,
        &["enqueue", "echo", "--queue", "reprots"],
        &[
            "unknown queue \"reprots\"",
            "known queues: default, reports",
        ],
    );
    refused(
        db,
        &["pause", "reprots"],
        &["known queues: default, reports"],
    );
    refused(
        db,
        &["jobs", "cancel", "--kind", "ecoh"],
        &["unknown kind \"ecoh\""],
    );
    refused(
        db,
        &["jobs", "run-now", "--queue", "reprots"],
        &["unknown queue \"reprots\""],
    );
    assert_eq!(
        db.count("solidq_jobs"),
        jobs,
        "refused commands wrote nothing"
    );
    assert_eq!(db.count("solidq_pauses"), 0);
    // Known names go ahead, without a warning.
    for args in [
        vec!["enqueue", "echo"],
        vec!["enqueue", "nightly_report", "--queue", "reports"],
        vec!["pause", "reports"],
    ] {
        let (code, _, err) = solidq(db, &args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
    }
    // A recurring task's kind and queue are known too.
    let task = solidq::RecurringTask::untyped("weekly", "0 0 * * 0", "weekly_digest", json!({}))
        .unwrap()
        .queue("digests");
    solidq::Scheduler::new(queue.clone())
        .task(task)
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let (code, _, err) = solidq(db, &["enqueue", "weekly_digest", "--queue", "digests"]);
    assert_eq!((code, err.as_str()), (0, ""), "a recurring task's names");
}
