//! Batches (src/batch.rs) on every backend: callbacks enqueued once, when
//! the last member ended, with the counts; open, closed and nested
//! batches; an operator's retry of a failed member; and a batch of 1,000
//! under SIGKILL every 300 ms.

use crate::common;

use std::time::Duration;

use common::child::kill_one_every_300ms;
use common::jobs::{Echo, Hopeless, Ledger};
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::{BatchOptions, EnqueueOptions, Error, FailedFilter, JobRequest, Queue};

backend_tests!(
    callbacks_fire_once_when_the_last_member_ends_with_the_counts,
    an_open_batch_finishes_only_once_closed_and_then_takes_no_members,
    a_child_batch_is_one_member_of_its_parent,
    a_retried_failed_member_lets_success_fire_later,
    a_batch_is_written_whole_or_not_at_all,
    a_batch_on_the_callers_connection_commits_and_rolls_back_with_it,
    a_batch_of_1000_under_sigkill_fires_each_callback_once_after_its_last_member,
);

const WAIT: Duration = Duration::from_secs(30);

/// A callback job: an `echo` of `{"callback": which, "batch": id}`.
fn callback(which: &'static str) -> impl Fn(i64) -> solidq::Result<JobRequest> {
    move |batch| {
        JobRequest::new(
            &Echo {
                value: json!({"callback": which, "batch": batch}),
            },
            EnqueueOptions::new(),
        )
    }
}

fn all_callbacks() -> BatchOptions {
    BatchOptions::new()
        .on_complete(callback("complete"))
        .on_success(callback("success"))
        .on_failure(callback("failure"))
}

/// How many `which` callback jobs of `batch` exist.
fn callbacks(db: &TestDb, which: &str, batch: i64) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs
         WHERE kind = 'echo' AND arguments LIKE '%\"batch\":{batch},%'
           AND arguments LIKE '%\"callback\":\"{which}\"%'"
    ))
}

/// Nothing waits or runs (failed jobs are not finished: they wait for an
/// operator).
fn settled(db: &TestDb) -> bool {
    [
        "solidq_ready_executions",
        "solidq_scheduled_executions",
        "solidq_claimed_executions",
    ]
    .iter()
    .all(|table| db.count(table) == 0)
}

/// Runs a worker of 2 threads until `batch` finished and its callbacks
/// ran; returns the batch as it finished.
fn work_until_finished(db: &TestDb, queue: &Queue, batch: i64) -> solidq::BatchInfo {
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    let info = wait_finished(queue, batch);
    wait_for("the callbacks to run", WAIT, || settled(db));
    worker.stop().unwrap();
    info
}

fn echo(n: i64) -> JobRequest {
    JobRequest::new(&Echo { value: json!(n) }, EnqueueOptions::new()).unwrap()
}

fn wait_finished(queue: &Queue, batch: i64) -> solidq::BatchInfo {
    let mut info = None;
    wait_for("the batch to finish", WAIT, || {
        info = queue.batch_info(batch).unwrap();
        info.as_ref().is_some_and(|i| i.is_finished())
    });
    info.unwrap()
}

/// Every member of `batch` had ended (finished, or failed for good) when
/// its `which` callback started. (Not "was enqueued": the times a job's
/// end and a callback's creation are stamped with are their
/// transactions' starts, and a member ended by a transaction that began
/// after the callback's, but committed before the callback's transaction
/// counted it, would look later than the callback without being so. The
/// callback starts only after the transaction that enqueued it
/// committed.)
fn assert_after_last_member(db: &TestDb, which: &str, batch: i64) {
    let started = db.scalar(&format!(
        "SELECT count(c.started_at) AS v FROM solidq_jobs c
         WHERE c.kind = 'echo' AND c.arguments LIKE '%\"batch\":{batch},%'
           AND c.arguments LIKE '%\"callback\":\"{which}\"%'"
    ));
    assert_eq!(started, 1, "the {which} callback of batch {batch} ran once");
    let late = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs m
         LEFT JOIN solidq_failed_executions f ON f.job_id = m.id
         WHERE m.batch_id = {batch}
           AND (coalesce(m.finished_at, f.created_at) IS NULL
                OR coalesce(m.finished_at, f.created_at) > (
                   SELECT min(c.started_at) FROM solidq_jobs c
                   WHERE c.kind = 'echo' AND c.arguments LIKE '%\"batch\":{batch},%'
                     AND c.arguments LIKE '%\"callback\":\"{which}\"%'))"
    ));
    assert_eq!(
        late, 0,
        "members of batch {batch} ended after its {which} callback started"
    );
}

fn callbacks_fire_once_when_the_last_member_ends_with_the_counts(db: &TestDb) {
    let queue = db.queue();
    let mut jobs: Vec<JobRequest> = (0..20).map(echo).collect();
    jobs.push(JobRequest::new(&Hopeless, EnqueueOptions::new()).unwrap());
    let made = queue
        .batch(all_callbacks().description("twenty and one"), &jobs)
        .unwrap();
    assert_eq!(made.jobs.len(), 21);
    let before = queue.batch_info(made.id).unwrap().unwrap();
    assert_eq!(
        (
            before.total,
            before.pending,
            before.succeeded,
            before.failed
        ),
        (21, 21, 0, 0)
    );
    assert!(before.closed_at.is_some() && !before.is_finished());
    for id in &made.jobs {
        assert_eq!(queue.job(*id).unwrap().batch_id, Some(made.id));
    }
    let worker = common::jobs::worker(queue.clone())
        .threads(4)
        .start()
        .unwrap();
    let info = wait_finished(&queue, made.id);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (21, 0, 20, 1)
    );
    assert_eq!(info.description.as_deref(), Some("twenty and one"));
    wait_for("the callbacks to run", WAIT, || settled(db));
    worker.stop().unwrap();
    assert_eq!(callbacks(db, "complete", made.id), 1);
    assert_eq!(callbacks(db, "failure", made.id), 1);
    assert_eq!(callbacks(db, "success", made.id), 0, "a member failed");
    assert_eq!(info.fired, vec!["complete", "failure"]);
    assert_after_last_member(db, "complete", made.id);
    // A callback is not a member.
    let callback_job: i64 = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs WHERE kind = 'echo' AND batch_id IS NULL
           AND arguments LIKE '%\"batch\":{},%'",
        made.id
    ));
    assert_eq!(callback_job, 2);
    common::assert_invariants(db);
}

fn an_open_batch_finishes_only_once_closed_and_then_takes_no_members(db: &TestDb) {
    let queue = db.queue();
    let batch = queue.open_batch(all_callbacks()).unwrap();
    let first = queue.add_to_batch(batch, &[echo(1), echo(2)]).unwrap();
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    wait_for("the members to succeed", WAIT, || {
        queue.batch_info(batch).unwrap().unwrap().succeeded == 2
    });
    let open = queue.batch_info(batch).unwrap().unwrap();
    assert!(!open.is_finished(), "open: {open:?}");
    assert_eq!(
        callbacks(db, "complete", batch),
        0,
        "not before it is closed"
    );
    queue.add_to_batch(batch, &[echo(3)]).unwrap();
    queue.close_batch(batch).unwrap();
    let info = wait_finished(&queue, batch);
    assert_eq!((info.total, info.succeeded, info.failed), (3, 3, 0));
    queue.close_batch(batch).unwrap();
    match queue.add_to_batch(batch, &[echo(4)]) {
        Err(Error::BatchRefused { batch: b, reason }) => {
            assert_eq!(b, batch);
            assert!(reason.contains("finished"), "{reason}");
        }
        other => panic!("a finished batch took a member: {other:?}"),
    }
    assert!(matches!(
        queue.add_to_batch(999_999, &[echo(5)]),
        Err(Error::BatchRefused { batch: 999_999, .. })
    ));
    assert_eq!(
        db.count("solidq_jobs"),
        3 + 2,
        "members and callbacks, nothing refused"
    );
    // An empty batch finishes when made.
    let empty = queue.batch(all_callbacks(), &[]).unwrap();
    assert!(queue.batch_info(empty.id).unwrap().unwrap().is_finished());
    wait_for("the callbacks to run", WAIT, || settled(db));
    worker.stop().unwrap();
    for b in [batch, empty.id] {
        assert_eq!(callbacks(db, "complete", b), 1);
        assert_eq!(callbacks(db, "success", b), 1);
        assert_eq!(callbacks(db, "failure", b), 0);
    }
    // The CLI shows its progress.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_solidq"))
            .args(args)
            .args(["--database-url", &db.url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = cli(&["batch", &batch.to_string()]);
    for line in ["finished", "3 of 3 ended", "complete, success"] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&cli(&["batch", &batch.to_string(), "--json"])).unwrap();
    assert_eq!(json["succeeded"], 3);
    let job = cli(&["job", &first[0].to_string()]);
    assert!(
        job.lines()
            .any(|l| l.starts_with("batch") && l.ends_with(&batch.to_string())),
        "{job}"
    );
}

fn a_child_batch_is_one_member_of_its_parent(db: &TestDb) {
    let queue = db.queue();
    let parent = queue.open_batch(all_callbacks()).unwrap();
    queue.add_to_batch(parent, &[echo(1)]).unwrap();
    let child = queue
        .batch(
            all_callbacks().parent(parent),
            &[
                echo(2),
                JobRequest::new(&Hopeless, EnqueueOptions::new()).unwrap(),
            ],
        )
        .unwrap();
    queue.close_batch(parent).unwrap();
    let before = queue.batch_info(parent).unwrap().unwrap();
    assert_eq!(
        (before.total, before.pending),
        (2, 2),
        "a job and the child"
    );
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    let child_info = wait_finished(&queue, child.id);
    assert_eq!((child_info.succeeded, child_info.failed), (1, 1));
    let info = wait_finished(&queue, parent);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (2, 0, 1, 1),
        "the child counts as failed: one of its members failed"
    );
    wait_for("the callbacks to run", WAIT, || settled(db));
    worker.stop().unwrap();
    let parent_callback = db.scalar(&format!(
        "SELECT min(id) AS v FROM solidq_jobs WHERE arguments LIKE '%\"batch\":{parent},%'"
    ));
    let child_callback = db.scalar(&format!(
        "SELECT min(id) AS v FROM solidq_jobs WHERE arguments LIKE '%\"batch\":{},%'",
        child.id
    ));
    assert!(
        parent_callback > child_callback,
        "the parent finished after its child"
    );
    assert_eq!(callbacks(db, "complete", parent), 1);
    assert_eq!(callbacks(db, "failure", parent), 1);
    assert!(matches!(
        queue.batch(BatchOptions::new().parent(parent), &[echo(3)]),
        Err(Error::BatchRefused { .. })
    ));
}

fn a_retried_failed_member_lets_success_fire_later(db: &TestDb) {
    let queue = db.queue();
    let made = queue
        .batch(
            all_callbacks(),
            &[
                echo(1),
                JobRequest::new(&Hopeless, EnqueueOptions::new()).unwrap(),
            ],
        )
        .unwrap();
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    let info = wait_finished(&queue, made.id);
    assert_eq!((info.succeeded, info.failed), (1, 1));
    worker.stop().unwrap();
    // Hopeless fails every time: the retry makes it pending again, and the
    // batch finishes again with it failed; nothing fires twice.
    let failed = made.jobs[1];
    queue.retry_failed(&FailedFilter::ids([failed])).unwrap();
    let reopened = queue.batch_info(made.id).unwrap().unwrap();
    assert_eq!((reopened.pending, reopened.failed), (1, 0), "{reopened:?}");
    assert!(!reopened.is_finished());
    let info = work_until_finished(db, &queue, made.id);
    assert_eq!((info.succeeded, info.failed), (1, 1));
    assert_eq!(callbacks(db, "complete", made.id), 1);
    assert_eq!(callbacks(db, "failure", made.id), 1);
    assert_eq!(callbacks(db, "success", made.id), 0);
}

fn a_batch_is_written_whole_or_not_at_all(db: &TestDb) {
    let queue = db.queue();
    let keyed = |n: i64| {
        JobRequest::new(
            &Echo { value: json!(n) },
            EnqueueOptions::new().unique_key("taken"),
        )
        .unwrap()
    };
    queue.enqueue_batch(&[keyed(0)]).unwrap();
    let refused = queue.batch(all_callbacks(), &[echo(1), keyed(2)]);
    assert!(
        matches!(refused, Err(Error::Duplicate { .. })),
        "{refused:?}"
    );
    assert_eq!(db.count("solidq_batches"), 0, "no batch without its jobs");
    assert_eq!(db.count("solidq_jobs"), 1, "no job without its batch");
    // A callback whose job cannot be built refuses the batch too.
    let bad = BatchOptions::new().on_complete(|_| {
        JobRequest::new(
            &Echo { value: json!(0) },
            EnqueueOptions::new().queue("bad queue!"),
        )
    });
    assert!(queue.batch(bad, &[echo(3)]).is_err());
    assert_eq!(db.count("solidq_batches"), 0);
    assert_eq!(db.count("solidq_jobs"), 1);
    // Bad bytes: a description PostgreSQL could not store is refused
    // before anything is written, naming the value.
    match queue.batch(BatchOptions::new().description("a\0b"), &[echo(4)]) {
        Err(Error::InvalidOption { option, value, .. }) => {
            assert_eq!((option, value.as_str()), ("batch description", "a\0b"));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        queue
            .open_batch(BatchOptions::new().description("\0"))
            .is_err()
    );
    assert_eq!(db.count("solidq_batches"), 0);
    assert_eq!(db.count("solidq_jobs"), 1);
    // Text with every other byte is kept as given.
    let odd = "tab\t, quote ', backslash \\, emoji 🦀, \u{7f}";
    let kept = queue
        .open_batch(BatchOptions::new().description(odd))
        .unwrap();
    let info = queue.batch_info(kept).unwrap().unwrap();
    assert_eq!(info.description.as_deref(), Some(odd));
}

fn a_batch_of_1000_under_sigkill_fires_each_callback_once_after_its_last_member(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let members: Vec<JobRequest> = (0..1_000)
        .map(|n| {
            let job = Ledger {
                url: db.url.clone(),
                n,
                sleep_ms: 5 + fastrand::u64(..16),
            };
            JobRequest::new(&job, EnqueueOptions::new().max_stalled_count(1_000)).unwrap()
        })
        .collect();
    let made = queue.batch(all_callbacks(), &members).unwrap();
    let settings = [
        ("SOLIDQ_TEST_THREADS", "4"),
        ("SOLIDQ_TEST_ALIVE_MS", "1000"),
        ("SOLIDQ_TEST_HEARTBEAT_MS", "100"),
    ];
    // SIGKILL a worker every 300 ms for 10 s, starting another in its
    // place (standalone workers prune the dead).
    let (workers, kills) =
        kill_one_every_300ms(&db.url, &settings, Duration::from_secs(10), || false);
    assert!(kills >= 20, "{kills} kills");
    let info = {
        let mut info = None;
        wait_for("the batch to finish", Duration::from_secs(180), || {
            info = queue.batch_info(made.id).unwrap();
            info.as_ref().is_some_and(|i| i.is_finished())
        });
        info.unwrap()
    };
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (1_000, 0, 1_000, 0)
    );
    wait_for("the callbacks to run", Duration::from_secs(60), || {
        settled(db)
    });
    drop(workers);
    assert_eq!(callbacks(db, "complete", made.id), 1);
    assert_eq!(callbacks(db, "success", made.id), 1);
    assert_eq!(callbacks(db, "failure", made.id), 0);
    assert_after_last_member(db, "complete", made.id);
    assert_after_last_member(db, "success", made.id);
    let reruns = db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'start'") - 1_000;
    eprintln!(
        "{}: {kills} kills, {reruns} member runs cut short and rerun",
        db.backend
    );
    assert!(reruns > 0, "the chaos should have cut some members short");
    common::assert_invariants(db);
}

fn a_batch_on_the_callers_connection_commits_and_rolls_back_with_it(db: &TestDb) {
    let queue = db.queue();
    let mut conn: solidq::AnyConnection = queue.open_connection().unwrap();
    // The caller's transaction rolls back: no batch, no job.
    let rolled_back = conn.write_transaction::<(), Error, _>(|c| {
        queue.batch_on(c, all_callbacks(), &[echo(1), echo(2)])?;
        Err(Error::NothingToDo {
            action: "commit",
            reason: "the caller changed its mind".into(),
        })
    });
    assert!(rolled_back.is_err());
    assert_eq!(
        (db.count("solidq_batches"), db.count("solidq_jobs")),
        (0, 0)
    );
    // A refused batch inside the caller's transaction leaves nothing of
    // itself, and the transaction commits the rest.
    queue
        .enqueue_batch(&[JobRequest::new(
            &Echo { value: json!(0) },
            EnqueueOptions::new().unique_key("taken"),
        )
        .unwrap()])
        .unwrap();
    let made = conn
        .write_transaction::<_, Error, _>(|c| {
            let taken = JobRequest::new(
                &Echo { value: json!(9) },
                EnqueueOptions::new().unique_key("taken"),
            )?;
            let refused = queue.batch_on(c, all_callbacks(), &[echo(3), taken]);
            assert!(
                matches!(refused, Err(Error::Duplicate { .. })),
                "{refused:?}"
            );
            queue.batch_on(c, all_callbacks(), &[echo(4), echo(5)])
        })
        .unwrap();
    assert_eq!(db.count("solidq_batches"), 1, "only the second batch");
    assert_eq!(db.count("solidq_jobs"), 1 + 2);
    let info = work_until_finished(db, &queue, made.id);
    assert_eq!((info.total, info.succeeded), (2, 2));
    assert_eq!(callbacks(db, "complete", made.id), 1);
    assert_eq!(callbacks(db, "success", made.id), 1);
}
